! allreduce_latency (Fortran): 8-byte MPI_ALLREDUCE latency through the
! Fortran binding, the cost collmux must not add to a call that stays on
! MPI. Prints the median over batches of the mean time per call, in
! microseconds, from rank 0 (as allreduce_latency.c does for C).
program allreduce_latency
  use mpi
  implicit none
  integer, parameter :: batches = 50, per = 2000
  integer :: ierr, rank, b, i
  double precision :: x, y, t0, t(batches), tmp

  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  x = 1
  do i = 1, per ! warm up
    call MPI_Allreduce(x, y, 1, MPI_DOUBLE_PRECISION, MPI_SUM, MPI_COMM_WORLD, ierr)
  end do
  do b = 1, batches
    call MPI_Barrier(MPI_COMM_WORLD, ierr)
    t0 = MPI_Wtime()
    do i = 1, per
      call MPI_Allreduce(x, y, 1, MPI_DOUBLE_PRECISION, MPI_SUM, MPI_COMM_WORLD, ierr)
    end do
    t(b) = (MPI_Wtime() - t0) / per * 1d6
  end do
  do b = 2, batches ! insertion sort: the median needs order
    tmp = t(b)
    i = b - 1
    do while (i >= 1)
      if (t(i) <= tmp) exit
      t(i + 1) = t(i)
      i = i - 1
    end do
    t(i + 1) = tmp
  end do
  if (rank == 0) print '(f12.4)', t(batches / 2 + 1)
  call MPI_Finalize(ierr)
end program
