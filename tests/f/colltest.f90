! fcolltest: every collective collmux intercepts, called from Fortran
! (`use mpi`), with MPI_IN_PLACE where MPI allows it and an invalid root
! under MPI_ERRORS_RETURN. Rank 0 prints one checksum per result and
! rank, so that runs with and without collmux can be compared byte for
! byte.
program fcolltest
  use mpi
  implicit none
  integer, parameter :: n = 7
  integer :: ierr, rank, np, i, j, root, cls
  integer, allocatable :: sb(:), rb(:), cnt(:), dsp(:)
  double precision :: ds(n), dr(n)

  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  call MPI_Comm_size(MPI_COMM_WORLD, np, ierr)
  allocate(sb(n * np), rb(n * np), cnt(np), dsp(np))
  root = np - 1
  do j = 1, np
    cnt(j) = j
    dsp(j) = (j - 1) * n
  end do

  call fill()
  call MPI_Allreduce(sb, rb, n, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, ierr)
  call report('allreduce', rb, n)
  call fill()
  call MPI_Allreduce(MPI_IN_PLACE, sb, n, MPI_INTEGER, MPI_MAX, MPI_COMM_WORLD, ierr)
  call report('allreduce.inplace', sb, n)
  ds = [(rank + 0.25d0 * i, i = 1, n)]
  call MPI_Allreduce(ds, dr, n, MPI_DOUBLE_PRECISION, MPI_SUM, MPI_COMM_WORLD, ierr)
  call report('allreduce.double', int(dr * 4), n)

  call fill()
  call MPI_Reduce(sb, rb, n, MPI_INTEGER, MPI_SUM, root, MPI_COMM_WORLD, ierr)
  if (rank /= root) rb = 0
  call report('reduce', rb, n)
  call fill()
  if (rank == root) then
    call MPI_Reduce(MPI_IN_PLACE, sb, n, MPI_INTEGER, MPI_MIN, root, MPI_COMM_WORLD, ierr)
  else
    call MPI_Reduce(sb, rb, n, MPI_INTEGER, MPI_MIN, root, MPI_COMM_WORLD, ierr)
    sb = 0
  end if
  call report('reduce.inplace', sb, n)

  call fill()
  call MPI_Bcast(sb, n, MPI_INTEGER, root, MPI_COMM_WORLD, ierr)
  call report('bcast', sb, n)

  call fill()
  call MPI_Allgather(sb, n, MPI_INTEGER, rb, n, MPI_INTEGER, MPI_COMM_WORLD, ierr)
  call report('allgather', rb, n * np)
  call fill()
  rb(rank * n + 1:rank * n + n) = sb(1:n)
  call MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, rb, n, MPI_INTEGER, MPI_COMM_WORLD, ierr)
  call report('allgather.inplace', rb, n * np)
  call fill()
  call MPI_Allgatherv(sb, rank + 1, MPI_INTEGER, rb, cnt, dsp, MPI_INTEGER, MPI_COMM_WORLD, ierr)
  call report('allgatherv', rb, n * np)

  call fill()
  call MPI_Gather(sb, n, MPI_INTEGER, rb, n, MPI_INTEGER, 0, MPI_COMM_WORLD, ierr)
  if (rank /= 0) rb = 0
  call report('gather', rb, n * np)
  call fill()
  call MPI_Gatherv(sb, rank + 1, MPI_INTEGER, rb, cnt, dsp, MPI_INTEGER, root, MPI_COMM_WORLD, ierr)
  if (rank /= root) rb = 0
  call report('gatherv', rb, n * np)

  call fill()
  call MPI_Scatter(sb, n, MPI_INTEGER, rb, n, MPI_INTEGER, root, MPI_COMM_WORLD, ierr)
  call report('scatter', rb, n)
  call fill()
  call MPI_Scatterv(sb, cnt, dsp, MPI_INTEGER, rb, rank + 1, MPI_INTEGER, 0, MPI_COMM_WORLD, ierr)
  call report('scatterv', rb, rank + 1)

  call fill()
  call MPI_Alltoall(sb, n, MPI_INTEGER, rb, n, MPI_INTEGER, MPI_COMM_WORLD, ierr)
  call report('alltoall', rb, n * np)
  call fill()
  call MPI_Alltoallv(sb, cnt, dsp, MPI_INTEGER, rb, [(rank + 1, j = 1, np)], dsp, MPI_INTEGER, MPI_COMM_WORLD, ierr)
  call report('alltoallv', rb, n * np)

  call fill()
  call MPI_Reduce_scatter(sb, rb, cnt, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, ierr)
  call report('reduce_scatter', rb, rank + 1)
  call fill()
  call MPI_Reduce_scatter_block(sb, rb, 2, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, ierr)
  call report('reduce_scatter_block', rb, 2)
  call fill()
  call MPI_Reduce_scatter_block(MPI_IN_PLACE, sb, 2, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, ierr)
  call report('reduce_scatter_block.inplace', sb, 2)

  call fill()
  call MPI_Scan(sb, rb, n, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, ierr)
  call report('scan', rb, n)
  call fill()
  call MPI_Exscan(sb, rb, n, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, ierr)
  if (rank == 0) rb = 0 ! undefined on rank 0
  call report('exscan', rb, n)

  call MPI_Barrier(MPI_COMM_WORLD, ierr)
  call MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN, ierr)
  call MPI_Bcast(sb, n, MPI_INTEGER, np + 3, MPI_COMM_WORLD, ierr)
  call MPI_Error_class(ierr, cls, i)
  if (rank == 0) print '(a,l2,i4)', 'bcast.badroot error', ierr /= MPI_SUCCESS, cls
  call MPI_Finalize(ierr)

contains

  ! this rank's send data: distinct per rank and element
  subroutine fill()
    sb = [(rank * 100 + i, i = 1, n * np)]
    rb = -1
  end subroutine

  ! every rank's checksum of buf(1:m), printed by rank 0 in rank order
  subroutine report(name, buf, m)
    character(*), intent(in) :: name
    integer, intent(in) :: m, buf(:)
    integer :: sum1, all(np), e
    sum1 = 0
    do e = 1, m
      sum1 = sum1 + e * buf(e)
    end do
    call MPI_Gather(sum1, 1, MPI_INTEGER, all, 1, MPI_INTEGER, 0, MPI_COMM_WORLD, ierr)
    if (rank == 0) print '(a,1x,*(i0,1x))', name, all
  end subroutine
end program
