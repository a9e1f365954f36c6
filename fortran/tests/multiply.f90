! Fortran test of the rusparse module: one-based matrices multiplied
! through the raw C interface and through rusparse_multiply, checked
! against dense products computed here. Prints "N passed, M failed" and
! stops with code 1 on any failure.
program multiply_test
  use, intrinsic :: iso_c_binding
  use rusparse
  implicit none
  integer :: passed = 0, failed = 0

  ! A (5 x 4) and B (4 x 6), one-based CSR; A's row 4 is empty.
  integer(c_int32_t), target :: a_rows(6) = [1, 3, 4, 6, 6, 9]
  integer(c_int32_t), target :: a_cols(8) = [1, 3, 2, 1, 4, 2, 3, 4]
  real(c_double), target :: a_vals(8) = [2d0, -1d0, 3d0, 1d0, 4d0, 5d0, 2d0, -3d0]
  integer(c_int32_t), target :: b_rows(5) = [1, 3, 5, 7, 9]
  integer(c_int32_t), target :: b_cols(8) = [1, 4, 2, 5, 3, 6, 1, 6]
  real(c_double), target :: b_vals(8) = [1d0, 2d0, -2d0, 1d0, 3d0, 1d0, 4d0, -1d0]

  call raw_interface()
  call multiply_real()
  call multiply_complex_conjugate_transpose()
  call multiply_empty_and_bad_input()

  write (*, '(i0, a, i0, a)') passed, " passed, ", failed, " failed"
  if (failed > 0) stop 1

contains

  subroutine check(ok, what)
    logical, intent(in) :: ok
    character(len=*), intent(in) :: what
    if (ok) then
      passed = passed + 1
    else
      failed = failed + 1
      write (*, '(a, a)') "FAILED: ", what
    end if
  end subroutine

  ! Dense form of a one-based CSR matrix.
  function dense_r(nrows, ncols, rows, cols, vals) result(d)
    integer, intent(in) :: nrows, ncols
    integer(c_int32_t), intent(in) :: rows(:), cols(:)
    real(c_double), intent(in) :: vals(:)
    real(c_double) :: d(nrows, ncols)
    integer :: i, k
    d = 0
    do i = 1, nrows
      do k = rows(i), rows(i + 1) - 1
        d(i, cols(k)) = d(i, cols(k)) + vals(k)
      end do
    end do
  end function

  function dense_c(nrows, ncols, rows, cols, vals) result(d)
    integer, intent(in) :: nrows, ncols
    integer(c_int32_t), intent(in) :: rows(:), cols(:)
    complex(c_double_complex), intent(in) :: vals(:)
    complex(c_double_complex) :: d(nrows, ncols)
    integer :: i, k
    d = 0
    do i = 1, nrows
      do k = rows(i), rows(i + 1) - 1
        d(i, cols(k)) = d(i, cols(k)) + vals(k)
      end do
    end do
  end function

  ! C's rows are one-based, sorted and without repeats.
  logical function canonical(nrows, ncols, rows, cols)
    integer, intent(in) :: nrows, ncols
    integer(c_int32_t), intent(in) :: rows(:), cols(:)
    integer :: i, k
    canonical = size(rows) == nrows + 1 .and. rows(1) == 1
    if (.not. canonical) return
    do i = 1, nrows
      if (rows(i + 1) < rows(i)) canonical = .false.
      do k = rows(i), rows(i + 1) - 1
        if (cols(k) < 1 .or. cols(k) > ncols) canonical = .false.
        if (k > rows(i)) then
          if (cols(k) <= cols(k - 1)) canonical = .false.
        end if
      end do
    end do
  end function

  ! The C functions one by one, as a C program calls them: C = 2 * A * B.
  subroutine raw_interface()
    type(c_ptr) :: handle, mat_a, mat_b, mat_c, descr
    integer(c_int32_t), allocatable, target :: c_rows(:), c_cols(:)
    real(c_double), allocatable, target :: c_vals(:)
    integer(c_int8_t), allocatable, target :: buffer1(:), buffer2(:)
    real(c_double), target :: alpha = 2d0, beta = 0d0
    integer(c_size_t) :: size1, size2
    integer(c_int64_t) :: rows, cols, nnz, nprod
    integer(c_int) :: version, backend, base
    integer(c_int32_t) :: num_bins, chunks
    integer(c_int64_t) :: rows_per_bin(4)
    integer, parameter :: n_op = RUSPARSE_OPERATION_NON_TRANSPOSE

    call check(rusparseCreateWithBackend(handle, RUSPARSE_BACKEND_CPU) == RUSPARSE_STATUS_SUCCESS, &
               "create a CPU handle")
    call check(rusparseGetVersion(handle, version) == RUSPARSE_STATUS_SUCCESS .and. &
               version > 0, "version")
    call check(rusparse_create_csr(mat_a, 4, a_rows, a_cols, a_vals) == RUSPARSE_STATUS_SUCCESS, &
               "describe A")
    call check(rusparse_create_csr(mat_b, 6, b_rows, b_cols, b_vals) == RUSPARSE_STATUS_SUCCESS, &
               "describe B")
    call check(rusparseSpMatGetIndexBase(mat_a, base) == RUSPARSE_STATUS_SUCCESS .and. &
               base == RUSPARSE_INDEX_BASE_ONE, "A is one-based")
    allocate (c_rows(6))
    call check(rusparseCreateCsr(mat_c, 5_c_int64_t, 6_c_int64_t, 0_c_int64_t, c_loc(c_rows), &
               c_null_ptr, c_null_ptr, RUSPARSE_INDEX_32I, RUSPARSE_INDEX_32I, &
               RUSPARSE_INDEX_BASE_ONE, RUSPARSE_R_64F) == RUSPARSE_STATUS_SUCCESS, "describe C")
    call check(rusparseSpGEMM_createDescr(descr) == RUSPARSE_STATUS_SUCCESS, "SpGEMM descriptor")

    size1 = 0
    call check(rusparseSpGEMM_workEstimation(handle, n_op, n_op, c_loc(alpha), mat_a, mat_b, &
               c_loc(beta), mat_c, RUSPARSE_R_64F, RUSPARSE_SPGEMM_DEFAULT, descr, size1, &
               c_null_ptr) == RUSPARSE_STATUS_SUCCESS .and. size1 > 0, "work estimation size")
    allocate (buffer1(size1))
    call check(rusparseSpGEMM_workEstimation(handle, n_op, n_op, c_loc(alpha), mat_a, mat_b, &
               c_loc(beta), mat_c, RUSPARSE_R_64F, RUSPARSE_SPGEMM_DEFAULT, descr, size1, &
               c_loc(buffer1)) == RUSPARSE_STATUS_SUCCESS, "work estimation")
    call check(rusparseSpGEMM_getNumProducts(descr, nprod) == RUSPARSE_STATUS_SUCCESS .and. &
               nprod == 16, "products")
    size2 = 0
    call check(rusparseSpGEMM_compute(handle, n_op, n_op, c_loc(alpha), mat_a, mat_b, &
               c_loc(beta), mat_c, RUSPARSE_R_64F, RUSPARSE_SPGEMM_DEFAULT, descr, size2, &
               c_null_ptr) == RUSPARSE_STATUS_SUCCESS, "compute size")
    allocate (buffer2(size2))
    call check(rusparseSpGEMM_compute(handle, n_op, n_op, c_loc(alpha), mat_a, mat_b, &
               c_loc(beta), mat_c, RUSPARSE_R_64F, RUSPARSE_SPGEMM_DEFAULT, descr, size2, &
               c_loc(buffer2)) == RUSPARSE_STATUS_SUCCESS, "compute")
    call check(rusparseSpMatGetSize(mat_c, rows, cols, nnz) == RUSPARSE_STATUS_SUCCESS .and. &
               rows == 5 .and. cols == 6 .and. nnz == 14, "C's size")
    nprod = -1
    num_bins = -1
    call check(rusparseSpGEMM_getBinCounts(descr, RUSPARSE_SPGEMM_BINS_NUMERIC, rows_per_bin, &
               4_c_int32_t, num_bins) == RUSPARSE_STATUS_SUCCESS .and. num_bins == 0, &
               "getBinCounts (the CPU does not bin rows)")
    call check(rusparseSpGEMM_setColumnOrder(descr, 7) == RUSPARSE_STATUS_INVALID_VALUE, &
               "setColumnOrder refuses an order that is not a rusparseColumnOrder_t")
    call check(rusparseSpGEMM_setColumnOrder(descr, RUSPARSE_COLUMN_ORDER_SORTED) == &
               RUSPARSE_STATUS_SUCCESS, "setColumnOrder (sorted, the default)")
    call check(rusparseSpGEMM_setPatternCheck(descr, 2) == RUSPARSE_STATUS_INVALID_VALUE, &
               "setPatternCheck refuses a check that is not a rusparsePatternCheck_t")
    call check(rusparseSpGEMM_setPatternCheck(descr, RUSPARSE_PATTERN_CHECK_HASH) == &
               RUSPARSE_STATUS_SUCCESS, "setPatternCheck (hash, the default)")
    call check(rusparseSpGEMM_setReuseCopyValues(descr, 0_c_int) == RUSPARSE_STATUS_SUCCESS, &
               "setReuseCopyValues (off, the default)")
    call check(rusparseSpGEMM_predictNnz(handle, n_op, n_op, mat_a, mat_b, nprod) == &
               RUSPARSE_STATUS_SUCCESS .and. nprod == 14, "predictNnz (exact at this size)")
    allocate (c_cols(nnz), c_vals(nnz))
    call check(rusparseCsrSetPointers(mat_c, c_loc(c_rows), c_loc(c_cols), c_loc(c_vals)) == &
               RUSPARSE_STATUS_SUCCESS, "C's arrays")
    call check(rusparseSpGEMM_copy(handle, n_op, n_op, c_loc(alpha), mat_a, mat_b, c_loc(beta), &
               mat_c, RUSPARSE_R_64F, RUSPARSE_SPGEMM_DEFAULT, descr) == RUSPARSE_STATUS_SUCCESS, &
               "copy")
    call check(rusparseGetBackend(handle, backend) == RUSPARSE_STATUS_SUCCESS .and. &
               backend == RUSPARSE_BACKEND_CPU, "ran on the CPU")
    call check(rusparseGetScratchSize(handle, size1, size2) == RUSPARSE_STATUS_SUCCESS .and. &
               size1 > 0 .and. size1 <= size2, "scratch kept after the product")
    call check(rusparseSpGEMM_getMemoryPlan(descr, size1, chunks) == RUSPARSE_STATUS_SUCCESS .and. &
               size1 > 0 .and. chunks >= 1, "getMemoryPlan")
    call check(rusparseSetMemoryBudget(handle, 1024_c_size_t * 1024_c_size_t) == &
               RUSPARSE_STATUS_SUCCESS, "setMemoryBudget(1 MiB)")
    call check(rusparseGetMemoryBudget(handle, size2) == RUSPARSE_STATUS_SUCCESS .and. &
               size2 == 1048576_c_size_t, "getMemoryBudget")
    call check(rusparseSetMemoryBudget(handle, 0_c_size_t) == RUSPARSE_STATUS_SUCCESS, &
               "setMemoryBudget(0): none")
    block
      ! Allocator hooks: none set (rusparse's own memory) is valid in any build.
      type(c_funptr) :: ha, hf, da, df
      type(c_ptr) :: user
      call check(rusparseSetAllocator(handle, c_null_funptr, c_null_funptr, c_null_funptr, &
                                      c_null_funptr, c_null_ptr) == RUSPARSE_STATUS_SUCCESS, &
                 "setAllocator(none)")
      call check(rusparseGetAllocator(handle, ha, hf, da, df, user) == RUSPARSE_STATUS_SUCCESS &
                 .and. .not. (c_associated(ha) .or. c_associated(hf) .or. c_associated(da) &
                 .or. c_associated(df) .or. c_associated(user)), "getAllocator(none)")
    end block
    call check(rusparseTrimScratch(handle) == RUSPARSE_STATUS_SUCCESS, "trimScratch")
    call check(rusparseSetScratchLimit(handle, 0_c_size_t) == RUSPARSE_STATUS_SUCCESS, &
               "setScratchLimit(0)")
    call check(rusparseGetScratchSize(handle, size1, size2) == RUSPARSE_STATUS_SUCCESS .and. &
               size1 == 0 .and. size2 == 0, "no scratch kept after trim and limit 0")

    call check(all(c_rows == [1, 5, 7, 10, 10, 15]), "raw: C's row pointer")
    call check(all(c_cols == [1, 3, 4, 6, 2, 5, 1, 4, 6, 1, 2, 3, 5, 6]), "raw: C's columns")
    call check(all(c_vals == [4d0, -6d0, 8d0, -2d0, -12d0, 6d0, 34d0, 4d0, -8d0, -24d0, -20d0, &
                              12d0, 10d0, 10d0]), "raw: C's values")
    call check(all(dense_r(5, 6, c_rows, c_cols, c_vals) == &
                   2 * matmul(dense_r(5, 4, a_rows, a_cols, a_vals), &
                              dense_r(4, 6, b_rows, b_cols, b_vals))), "raw: C = 2 A B")

    call check(rusparseSpGEMM_destroyDescr(descr) == RUSPARSE_STATUS_SUCCESS, "destroy descr")
    call check(rusparseDestroySpMat(mat_a) == RUSPARSE_STATUS_SUCCESS, "destroy A")
    call check(rusparseDestroySpMat(mat_b) == RUSPARSE_STATUS_SUCCESS, "destroy B")
    call check(rusparseDestroySpMat(mat_c) == RUSPARSE_STATUS_SUCCESS, "destroy C")
    call check(rusparseDestroy(handle) == RUSPARSE_STATUS_SUCCESS, "destroy handle")
  end subroutine

  ! rusparse_multiply: C = -1.5 * A * B, and C = Aᵀ * A.
  subroutine multiply_real()
    integer(c_int32_t), allocatable :: c_rows(:), c_cols(:)
    real(c_double), allocatable :: c_vals(:)
    real(c_double) :: da(5, 4), db(4, 6)
    integer(c_int) :: status
    da = dense_r(5, 4, a_rows, a_cols, a_vals)
    db = dense_r(4, 6, b_rows, b_cols, b_vals)

    status = rusparse_multiply(4, a_rows, a_cols, a_vals, 6, b_rows, b_cols, b_vals, &
                               c_rows, c_cols, c_vals, alpha=-1.5d0)
    call check(status == RUSPARSE_STATUS_SUCCESS, "multiply: " // rusparse_last_error())
    call check(canonical(5, 6, c_rows, c_cols), "multiply: C is canonical and one-based")
    call check(all(dense_r(5, 6, c_rows, c_cols, c_vals) == -1.5d0 * matmul(da, db)), &
               "multiply: C = -1.5 A B")

    status = rusparse_multiply(4, a_rows, a_cols, a_vals, 4, a_rows, a_cols, a_vals, &
                               c_rows, c_cols, c_vals, op_a=RUSPARSE_OPERATION_TRANSPOSE)
    call check(status == RUSPARSE_STATUS_SUCCESS, "multiply Aᵀ A: " // rusparse_last_error())
    call check(canonical(4, 4, c_rows, c_cols), "multiply Aᵀ A: canonical")
    call check(all(dense_r(4, 4, c_rows, c_cols, c_vals) == matmul(transpose(da), da)), &
               "multiply: C = Aᵀ A")

    ! B in preallocated arrays longer than its row pointer uses: the three
    ! entries past b_rows(5) - 1 are spare room, never read (they hold an
    ! out-of-range column and a huge value here).
    block
      integer(c_int32_t) :: wide_cols(11)
      real(c_double) :: wide_vals(11)
      wide_cols = [b_cols, 99, -4, 99]
      wide_vals = [b_vals, huge(1d0), huge(1d0), huge(1d0)]
      status = rusparse_multiply(4, a_rows, a_cols, a_vals, 6, b_rows, wide_cols, wide_vals, &
                                 c_rows, c_cols, c_vals)
      call check(status == RUSPARSE_STATUS_SUCCESS, "spare room: " // rusparse_last_error())
      call check(all(dense_r(5, 6, c_rows, c_cols, c_vals) == matmul(da, db)), &
                 "spare room: C = A B")
    end block
  end subroutine

  ! Complex values: C = Aᴴ * B with A 3 x 2, B 3 x 3.
  subroutine multiply_complex_conjugate_transpose()
    integer(c_int32_t), target :: ar(4) = [1, 3, 4, 5], ac(4) = [1, 2, 2, 1]
    complex(c_double_complex), target :: av(4) = [(1d0, 2d0), (0d0, -1d0), (3d0, 1d0), (2d0, 0d0)]
    integer(c_int32_t), target :: br(4) = [1, 2, 4, 6], bc(5) = [3, 1, 2, 2, 3]
    complex(c_double_complex), target :: bv(5) = [(1d0, 1d0), (2d0, 0d0), (0d0, 1d0), &
                                                   (1d0, -1d0), (4d0, 0d0)]
    integer(c_int32_t), allocatable :: c_rows(:), c_cols(:)
    complex(c_double_complex), allocatable :: c_vals(:)
    integer(c_int) :: status
    status = rusparse_multiply(2, ar, ac, av, 3, br, bc, bv, c_rows, c_cols, c_vals, &
                               op_a=RUSPARSE_OPERATION_CONJUGATE_TRANSPOSE, alpha=(0d0, 1d0))
    call check(status == RUSPARSE_STATUS_SUCCESS, "complex: " // rusparse_last_error())
    call check(canonical(2, 3, c_rows, c_cols), "complex: canonical")
    call check(all(dense_c(2, 3, c_rows, c_cols, c_vals) == (0d0, 1d0) * &
                   matmul(conjg(transpose(dense_c(3, 2, ar, ac, av))), dense_c(3, 3, br, bc, bv))), &
               "complex: C = i Aᴴ B")
  end subroutine

  ! An empty product, and the mistakes a caller makes.
  subroutine multiply_empty_and_bad_input()
    integer(c_int32_t), target :: er(4) = [1, 1, 1, 1]
    integer(c_int32_t), target :: no_cols(0)
    real(c_double), target :: no_vals(0)
    integer(c_int32_t), target :: bad_cols(8)
    integer(c_int32_t), allocatable :: c_rows(:), c_cols(:)
    real(c_double), allocatable :: c_vals(:)
    character(len=:), allocatable :: msg
    integer(c_int) :: status

    ! 3 x 5 empty times B (whose rows must be 5: use A, 5 x 4).
    status = rusparse_multiply(5, er, no_cols, no_vals, 4, a_rows, a_cols, a_vals, &
                               c_rows, c_cols, c_vals)
    call check(status == RUSPARSE_STATUS_SUCCESS, "empty: " // rusparse_last_error())
    call check(size(c_rows) == 4 .and. all(c_rows == 1) .and. size(c_cols) == 0 .and. &
               size(c_vals) == 0, "empty: C has no entries")

    ! Inner dimensions differ: A is 5 x 4, so A * A is refused.
    status = rusparse_multiply(4, a_rows, a_cols, a_vals, 4, a_rows, a_cols, a_vals, &
                               c_rows, c_cols, c_vals)
    msg = rusparse_last_error()
    call check(status == RUSPARSE_STATUS_INVALID_VALUE, "mismatched shapes are INVALID_VALUE")
    call check(index(msg, "rusparseSpGEMM_workEstimation") > 0, "mismatch message: " // msg)

    ! A zero-based column index in a one-based matrix.
    bad_cols = a_cols
    bad_cols(3) = 0
    status = rusparse_multiply(4, a_rows, bad_cols, a_vals, 6, b_rows, b_cols, b_vals, &
                               c_rows, c_cols, c_vals)
    msg = rusparse_last_error()
    call check(status == RUSPARSE_STATUS_INVALID_VALUE, "column 0 in a one-based A is refused")
    call check(index(msg, "colInd[2]") > 0, "bad column message: " // msg)

    ! Values and columns of different sizes: the helper's own check.
    status = rusparse_multiply(4, a_rows, a_cols, a_vals(1:7), 6, b_rows, b_cols, b_vals, &
                               c_rows, c_cols, c_vals)
    msg = rusparse_last_error()
    call check(status == RUSPARSE_STATUS_INVALID_VALUE, "short values are refused")
    call check(index(msg, "differ in size") > 0, "short values message: " // msg)
    call check(rusparse_status_name(status) == "RUSPARSE_STATUS_INVALID_VALUE", "status name")

    ! An empty row pointer (it needs rows + 1 entries): the helper's check.
    status = rusparse_multiply(4, no_cols, no_cols, no_vals, 6, b_rows, b_cols, b_vals, &
                               c_rows, c_cols, c_vals)
    msg = rusparse_last_error()
    call check(status == RUSPARSE_STATUS_INVALID_VALUE, "an empty row pointer is refused")
    call check(index(msg, "row_ptr is empty") > 0, "empty row pointer message: " // msg)
  end subroutine

end program multiply_test
