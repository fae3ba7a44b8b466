! fp2ptest: point-to-point from Fortran (`use mpi`): Send, Ssend, Bsend
! and Recv around a ring, with MPI_ANY_SOURCE / MPI_ANY_TAG and the
! status they fill (source, tag, MPI_Get_count), MPI_STATUS_IGNORE,
! Sendrecv and Sendrecv_replace; Isend and Irecv completed by MPI_Waitall,
! MPI_Test, MPI_Waitany and MPI_Waitsome; an MPI_Iallreduce and MPI_Wait;
! persistent Send_init / Recv_init started twice by MPI_Startall and
! MPI_Start, then freed, MPI_Waitany over null requests alone meanwhile;
! MPI_Waitsome's status of a receive beside a null request, and
! MPI_Request_get_status polled until a receive is done. Built with -DCOLLTEST_CUDA every message
! buffer is device memory (cudaMalloc through C interop), as a CUDA
! Fortran code's would be. Rank 0 prints one line per check, so that runs
! with and without collmux compare byte for byte.
program fp2ptest
  use mpi
  use iso_c_binding
  implicit none
  integer, parameter :: n = 1000
  integer :: ierr, rank, np, next, prev, cnt, fails, total
  integer :: st(MPI_STATUS_SIZE), sts(MPI_STATUS_SIZE, 2), reqs(2), idx(2), outc, k, nul(1)
  logical :: flag
  integer, pointer :: sb(:), rb(:)
  integer, allocatable, target :: h(:)
  integer, allocatable :: bsendbuf(:)
  character(len=40) :: what
#ifdef COLLTEST_CUDA
  interface
    integer(c_int) function cudaMalloc(p, bytes) bind(C, name="cudaMalloc")
      import :: c_ptr, c_int, c_size_t
      type(c_ptr) :: p
      integer(c_size_t), value :: bytes
    end function
    integer(c_int) function cudaMemcpy(dst, src, bytes, kind) bind(C, name="cudaMemcpy")
      import :: c_ptr, c_int, c_size_t
      type(c_ptr), value :: dst, src
      integer(c_size_t), value :: bytes
      integer(c_int), value :: kind
    end function
  end interface
  type(c_ptr) :: ds, dr
#endif

  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  call MPI_Comm_size(MPI_COMM_WORLD, np, ierr)
  next = mod(rank + 1, np)
  prev = mod(rank - 1 + np, np)
  fails = 0
  allocate(h(n))
#ifdef COLLTEST_CUDA
  ierr = cudaMalloc(ds, int(4 * n, c_size_t))
  ierr = cudaMalloc(dr, int(4 * n, c_size_t))
  call c_f_pointer(ds, sb, [n])
  call c_f_pointer(dr, rb, [n])
#else
  allocate(sb(n), rb(n))
#endif

  ! Send / Recv with wildcards: the status says who and what
  call put(sb, 1)
  if (mod(rank, 2) == 0) then
    call MPI_Send(sb, n - rank, MPI_INTEGER, next, 10 + rank, MPI_COMM_WORLD, ierr)
    call MPI_Recv(rb, n, MPI_INTEGER, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, st, ierr)
  else
    call MPI_Recv(rb, n, MPI_INTEGER, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, st, ierr)
    call MPI_Send(sb, n - rank, MPI_INTEGER, next, 10 + rank, MPI_COMM_WORLD, ierr)
  end if
  call MPI_Get_count(st, MPI_INTEGER, cnt, ierr)
  call check('send/recv', 1, prev, n - prev)
  call check_status('send/recv status', st(MPI_SOURCE) == prev .and. st(MPI_TAG) == 10 + prev .and. cnt == n - prev)

  ! Ssend, even ranks first; the receive ignores its status
  call put(sb, 2)
  if (mod(rank, 2) == 0) then
    call MPI_Ssend(sb, n, MPI_INTEGER, next, 20, MPI_COMM_WORLD, ierr)
    call MPI_Recv(rb, n, MPI_INTEGER, prev, 20, MPI_COMM_WORLD, MPI_STATUS_IGNORE, ierr)
  else
    call MPI_Recv(rb, n, MPI_INTEGER, prev, 20, MPI_COMM_WORLD, MPI_STATUS_IGNORE, ierr)
    call MPI_Ssend(sb, n, MPI_INTEGER, next, 20, MPI_COMM_WORLD, ierr)
  end if
  call check('ssend', 2, prev, n)

  ! Bsend through an attached buffer
  allocate(bsendbuf(n + 1000))
  call MPI_Buffer_attach(bsendbuf, 4 * (n + 1000), ierr)
  call put(sb, 3)
  call MPI_Bsend(sb, n, MPI_INTEGER, next, 30, MPI_COMM_WORLD, ierr)
  call MPI_Recv(rb, n, MPI_INTEGER, prev, 30, MPI_COMM_WORLD, st, ierr)
  call MPI_Buffer_detach(bsendbuf, cnt, ierr)
  call check('bsend', 3, prev, n)

  ! Sendrecv and Sendrecv_replace
  call put(sb, 4)
  call MPI_Sendrecv(sb, n, MPI_INTEGER, next, 40, rb, n, MPI_INTEGER, prev, 40, MPI_COMM_WORLD, st, ierr)
  call MPI_Get_count(st, MPI_INTEGER, cnt, ierr)
  call check('sendrecv', 4, prev, n)
  call check_status('sendrecv status', st(MPI_SOURCE) == prev .and. st(MPI_TAG) == 40 .and. cnt == n)
  call put(rb, 5)
  call MPI_Sendrecv_replace(rb, n, MPI_INTEGER, next, 50, prev, 50, MPI_COMM_WORLD, st, ierr)
  call check('sendrecv_replace', 5, prev, n)

  ! Isend / Irecv: Waitall with statuses
  call put(sb, 6)
  call MPI_Irecv(rb, n, MPI_INTEGER, prev, 60, MPI_COMM_WORLD, reqs(1), ierr)
  call MPI_Isend(sb, n, MPI_INTEGER, next, 60, MPI_COMM_WORLD, reqs(2), ierr)
  call MPI_Waitall(2, reqs, sts, ierr)
  call check('isend/irecv waitall', 6, prev, n)
  call check_status('waitall status', sts(MPI_SOURCE, 1) == prev .and. sts(MPI_TAG, 1) == 60 .and. &
                    reqs(1) == MPI_REQUEST_NULL .and. reqs(2) == MPI_REQUEST_NULL)

  ! MPI_Test until done, then MPI_Wait on the send
  call put(sb, 7)
  call MPI_Irecv(rb, n, MPI_INTEGER, MPI_ANY_SOURCE, 70, MPI_COMM_WORLD, reqs(1), ierr)
  call MPI_Isend(sb, n, MPI_INTEGER, next, 70, MPI_COMM_WORLD, reqs(2), ierr)
  flag = .false.
  do while (.not. flag)
    call MPI_Test(reqs(1), flag, st, ierr)
  end do
  call MPI_Wait(reqs(2), MPI_STATUS_IGNORE, ierr)
  call check('irecv test', 7, prev, n)
  call check_status('test status', st(MPI_SOURCE) == prev .and. reqs(1) == MPI_REQUEST_NULL)

  ! Waitany twice, then Waitsome on what is left (nothing)
  call put(sb, 8)
  call MPI_Irecv(rb, n, MPI_INTEGER, prev, 80, MPI_COMM_WORLD, reqs(1), ierr)
  call MPI_Isend(sb, n, MPI_INTEGER, next, 80, MPI_COMM_WORLD, reqs(2), ierr)
  idx = 0
  do k = 1, 2
    call MPI_Waitany(2, reqs, idx(k), st, ierr)
  end do
  call MPI_Waitsome(2, reqs, outc, idx, MPI_STATUSES_IGNORE, ierr)
  call check('irecv waitany', 8, prev, n)
  call check_status('waitany indices', outc == MPI_UNDEFINED .and. reqs(1) == MPI_REQUEST_NULL)

  ! a nonblocking collective on device memory
  call put(sb, 9)
  call MPI_Iallreduce(sb, rb, n, MPI_INTEGER, MPI_MAX, MPI_COMM_WORLD, reqs(1), ierr)
  call MPI_Wait(reqs(1), st, ierr)
  call check('iallreduce wait', 9, np - 1, n)

  ! persistent sends and receives, started twice
  call MPI_Recv_init(rb, n, MPI_INTEGER, prev, 100, MPI_COMM_WORLD, reqs(1), ierr)
  call MPI_Send_init(sb, n, MPI_INTEGER, next, 100, MPI_COMM_WORLD, reqs(2), ierr)
  do k = 10, 11
    call put(sb, k)
    if (k == 10) then
      call MPI_Startall(2, reqs, ierr)
    else
      call MPI_Start(reqs(1), ierr)
      call MPI_Start(reqs(2), ierr)
    end if
    call MPI_Waitall(2, reqs, sts, ierr)
    call check('persistent start', k, prev, n)
  end do
  ! Waitany over null requests alone: an empty status (and MPI_UNDEFINED,
  ! which MPICH 4.0's Fortran binding gives plus one: not checked)
  nul = MPI_REQUEST_NULL
  st = -5
  call MPI_Waitany(1, nul, k, st, ierr)
  call check_status('waitany of none', st(MPI_SOURCE) == MPI_ANY_SOURCE .and. st(MPI_TAG) == MPI_ANY_TAG)
  call MPI_Request_free(reqs(1), ierr)
  call MPI_Request_free(reqs(2), ierr)
  call check_status('persistent freed', reqs(1) == MPI_REQUEST_NULL .and. reqs(2) == MPI_REQUEST_NULL)

  ! Waitsome over a null request and a receive: the receive's status is the first
  call put(sb, 12)
  reqs(1) = MPI_REQUEST_NULL
  call MPI_Irecv(rb, n, MPI_INTEGER, MPI_ANY_SOURCE, 120, MPI_COMM_WORLD, reqs(2), ierr)
  call MPI_Send(sb, n, MPI_INTEGER, next, 120, MPI_COMM_WORLD, ierr)
  sts = -5
  call MPI_Waitsome(2, reqs, outc, idx, sts, ierr)
  call check('irecv waitsome', 12, prev, n)
  call check_status('waitsome status', outc == 1 .and. idx(1) == 2 .and. sts(MPI_SOURCE, 1) == prev .and. &
                    sts(MPI_TAG, 1) == 120)

  ! MPI_Request_get_status until a receive is done: its data is there before MPI_Wait
  call put(sb, 13)
  call MPI_Irecv(rb, n, MPI_INTEGER, prev, 130, MPI_COMM_WORLD, reqs(1), ierr)
  call MPI_Send(sb, n, MPI_INTEGER, next, 130, MPI_COMM_WORLD, ierr)
  flag = .false.
  do while (.not. flag)
    call MPI_Request_get_status(reqs(1), flag, st, ierr)
  end do
  call check('irecv request_get_status', 13, prev, n)
  call check_status('request_get_status status', st(MPI_TAG) == 130 .and. reqs(1) /= MPI_REQUEST_NULL)
  call MPI_Wait(reqs(1), MPI_STATUS_IGNORE, ierr)

  call MPI_Reduce(fails, total, 1, MPI_INTEGER, MPI_SUM, 0, MPI_COMM_WORLD, ierr)
  if (rank == 0) print '(a,i0,a,i0,a)', 'fp2ptest: ', np, ' ranks, ', total, ' failures'
  call MPI_Finalize(ierr)

contains

  ! b(i) = 1000 * rank + 100 * k + i, written wherever b lives
  subroutine put(b, k)
    integer, pointer :: b(:)
    integer, intent(in) :: k
    integer :: i
    h = [(1000 * rank + 100 * k + i, i = 1, n)]
#ifdef COLLTEST_CUDA
    ierr = cudaMemcpy(c_loc(b), c_loc(h), int(4 * n, c_size_t), 1)
#else
    b = h
#endif
  end subroutine

  ! rb holds m values put(., k) by rank `from`
  subroutine check(name, k, from, m)
    character(len=*), intent(in) :: name
    integer, intent(in) :: k, from, m
    integer :: i, bad
#ifdef COLLTEST_CUDA
    ierr = cudaMemcpy(c_loc(h), c_loc(rb), int(4 * n, c_size_t), 2)
#else
    h = rb
#endif
    bad = 0
    do i = 1, m
      if (h(i) /= 1000 * from + 100 * k + i) bad = bad + 1
    end do
    call check_status(name, bad == 0)
  end subroutine

  subroutine check_status(name, ok)
    character(len=*), intent(in) :: name
    logical, intent(in) :: ok
    logical :: all
    call MPI_Allreduce(ok, all, 1, MPI_LOGICAL, MPI_LAND, MPI_COMM_WORLD, ierr)
    if (.not. ok) fails = fails + 1
    what = name
    if (rank == 0) print '(a,1x,l1)', trim(what), all
  end subroutine
end program
