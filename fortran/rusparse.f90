!> rusparse for Fortran: `use rusparse`.
!>
!> * Every C function of include/rusparse.h, under its C name, through
!>   iso_c_binding (handles and descriptors are type(c_ptr); arrays, alpha
!>   and beta are passed as c_loc(...); enumerations are integer(c_int)).
!> * Every enumerator as a named constant (RUSPARSE_STATUS_SUCCESS, ...).
!> * Helpers for one-based CSR arrays as Fortran holds them:
!>   - rusparse_create_csr(descr, ncols, row_ptr, col_ind, values [, base])
!>     describes a matrix from integer(c_int32_t) or integer(c_int64_t)
!>     index arrays and real or complex (c_float / c_double) values;
!>   - rusparse_multiply(a_ncols, a_rows, a_cols, a_vals, b_ncols, b_rows,
!>     b_cols, b_vals, c_rows, c_cols, c_vals [, op_a, op_b, alpha, handle])
!>     runs C = alpha * op(A) * op(B) through all phases and allocates C's
!>     one-based arrays (int32 indices; real(c_double) or complex(c_double));
!>   - rusparse_last_error() returns the message of the last failed call.
!>
!> A descriptor keeps the addresses of the arrays it was given: pass whole,
!> contiguous arrays declared with the `target` attribute, and keep them
!> alive (and unmoved) until the descriptor is destroyed.
module rusparse
  use, intrinsic :: iso_c_binding
  implicit none
  private :: product_state, init_product, start_product, finish_product, release_product
  private :: op_rows, op_cols, set_helper_error, helper_error
  private :: create_csr_i32_r32, create_csr_i32_r64, create_csr_i32_c32, create_csr_i32_c64
  private :: create_csr_i64_r32, create_csr_i64_r64, create_csr_i64_c32, create_csr_i64_c64
  private :: create_csr_raw, multiply_i32_r64, multiply_i32_c64

  ! rusparseStatus_t
  integer(c_int), parameter :: RUSPARSE_STATUS_SUCCESS = 0
  integer(c_int), parameter :: RUSPARSE_STATUS_NOT_INITIALIZED = 1
  integer(c_int), parameter :: RUSPARSE_STATUS_ALLOC_FAILED = 2
  integer(c_int), parameter :: RUSPARSE_STATUS_INVALID_VALUE = 3
  integer(c_int), parameter :: RUSPARSE_STATUS_ARCH_MISMATCH = 4
  integer(c_int), parameter :: RUSPARSE_STATUS_MAPPING_ERROR = 5
  integer(c_int), parameter :: RUSPARSE_STATUS_EXECUTION_FAILED = 6
  integer(c_int), parameter :: RUSPARSE_STATUS_INTERNAL_ERROR = 7
  integer(c_int), parameter :: RUSPARSE_STATUS_MATRIX_TYPE_NOT_SUPPORTED = 8
  integer(c_int), parameter :: RUSPARSE_STATUS_ZERO_PIVOT = 9
  integer(c_int), parameter :: RUSPARSE_STATUS_NOT_SUPPORTED = 10
  integer(c_int), parameter :: RUSPARSE_STATUS_INSUFFICIENT_RESOURCES = 11
  ! rusparseOperation_t
  integer(c_int), parameter :: RUSPARSE_OPERATION_NON_TRANSPOSE = 0
  integer(c_int), parameter :: RUSPARSE_OPERATION_TRANSPOSE = 1
  integer(c_int), parameter :: RUSPARSE_OPERATION_CONJUGATE_TRANSPOSE = 2
  ! rusparseIndexType_t
  integer(c_int), parameter :: RUSPARSE_INDEX_16U = 1
  integer(c_int), parameter :: RUSPARSE_INDEX_32I = 2
  integer(c_int), parameter :: RUSPARSE_INDEX_64I = 3
  ! rusparseIndexBase_t
  integer(c_int), parameter :: RUSPARSE_INDEX_BASE_ZERO = 0
  integer(c_int), parameter :: RUSPARSE_INDEX_BASE_ONE = 1
  ! rusparseDataType_t
  integer(c_int), parameter :: RUSPARSE_R_32F = 0
  integer(c_int), parameter :: RUSPARSE_R_64F = 1
  integer(c_int), parameter :: RUSPARSE_R_16F = 2
  integer(c_int), parameter :: RUSPARSE_C_32F = 4
  integer(c_int), parameter :: RUSPARSE_C_64F = 5
  integer(c_int), parameter :: RUSPARSE_R_16BF = 14
  ! rusparseSpGEMMAlg_t
  integer(c_int), parameter :: RUSPARSE_SPGEMM_DEFAULT = 0
  integer(c_int), parameter :: RUSPARSE_SPGEMM_CSR_ALG_DETERMINISTIC = 1
  integer(c_int), parameter :: RUSPARSE_SPGEMM_CSR_ALG_NONDETERMINISTIC = 2
  integer(c_int), parameter :: RUSPARSE_SPGEMM_ALG1 = 3
  integer(c_int), parameter :: RUSPARSE_SPGEMM_ALG2 = 4
  integer(c_int), parameter :: RUSPARSE_SPGEMM_ALG3 = 5
  integer(c_int), parameter :: RUSPARSE_SPGEMM_CPU_HASH = 100
  integer(c_int), parameter :: RUSPARSE_SPGEMM_CPU_BRMERGE_PRECISE = 101
  integer(c_int), parameter :: RUSPARSE_SPGEMM_CPU_BRMERGE_UPPER = 102
  integer(c_int), parameter :: RUSPARSE_SPGEMM_CPU_DENSE = 103
  ! rusparsePointerMode_t
  integer(c_int), parameter :: RUSPARSE_POINTER_MODE_HOST = 0
  integer(c_int), parameter :: RUSPARSE_POINTER_MODE_DEVICE = 1
  ! rusparseBackend_t
  integer(c_int), parameter :: RUSPARSE_BACKEND_AUTO = 0
  integer(c_int), parameter :: RUSPARSE_BACKEND_CPU = 1
  integer(c_int), parameter :: RUSPARSE_BACKEND_CUDA = 2
  integer(c_int), parameter :: RUSPARSE_BACKEND_HIP = 3

  ! rusparseSpGEMMBins_t
  integer(c_int), parameter :: RUSPARSE_SPGEMM_BINS_SYMBOLIC = 0
  integer(c_int), parameter :: RUSPARSE_SPGEMM_BINS_NUMERIC = 1

  ! rusparseColumnOrder_t (rusparseSpGEMM_setColumnOrder, a rusparse extension)
  integer(c_int), parameter :: RUSPARSE_COLUMN_ORDER_SORTED = 0
  integer(c_int), parameter :: RUSPARSE_COLUMN_ORDER_ANY = 1
  ! rusparsePatternCheck_t (rusparseSpGEMM_setPatternCheck, a rusparse extension)
  integer(c_int), parameter :: RUSPARSE_PATTERN_CHECK_HASH = 0
  integer(c_int), parameter :: RUSPARSE_PATTERN_CHECK_CALLER = 1
  ! The library's version: rusparseGetVersion (major * 1000 + minor * 100
  ! + patch), so it is defined once, in Cargo.toml.

  ! ---- The C API -------------------------------------------------------------
  interface
    ! Errors
    type(c_ptr) function rusparseGetErrorName(status) bind(C, name="rusparseGetErrorName")
      import :: c_ptr, c_int
      integer(c_int), value :: status
    end function
    type(c_ptr) function rusparseGetErrorString(status) bind(C, name="rusparseGetErrorString")
      import :: c_ptr, c_int
      integer(c_int), value :: status
    end function
    type(c_ptr) function rusparseGetLastErrorMessage() bind(C, name="rusparseGetLastErrorMessage")
      import :: c_ptr
    end function

    ! Handle
    integer(c_int) function rusparseCreate(handle) bind(C, name="rusparseCreate")
      import :: c_int, c_ptr
      type(c_ptr), intent(out) :: handle
    end function
    integer(c_int) function rusparseCreateWithBackend(handle, backend) &
        bind(C, name="rusparseCreateWithBackend")
      import :: c_int, c_ptr
      type(c_ptr), intent(out) :: handle
      integer(c_int), value :: backend
    end function
    integer(c_int) function rusparseDestroy(handle) bind(C, name="rusparseDestroy")
      import :: c_int, c_ptr
      type(c_ptr), value :: handle
    end function
    integer(c_int) function rusparseSetStream(handle, stream) bind(C, name="rusparseSetStream")
      import :: c_int, c_ptr
      type(c_ptr), value :: handle, stream
    end function
    integer(c_int) function rusparseGetStream(handle, stream) bind(C, name="rusparseGetStream")
      import :: c_int, c_ptr
      type(c_ptr), value :: handle
      type(c_ptr), intent(out) :: stream
    end function
    integer(c_int) function rusparseSetPointerMode(handle, mode) &
        bind(C, name="rusparseSetPointerMode")
      import :: c_int, c_ptr
      type(c_ptr), value :: handle
      integer(c_int), value :: mode
    end function
    integer(c_int) function rusparseGetPointerMode(handle, mode) &
        bind(C, name="rusparseGetPointerMode")
      import :: c_int, c_ptr
      type(c_ptr), value :: handle
      integer(c_int), intent(out) :: mode
    end function
    integer(c_int) function rusparseGetVersion(handle, version) bind(C, name="rusparseGetVersion")
      import :: c_int, c_ptr
      type(c_ptr), value :: handle
      integer(c_int), intent(out) :: version
    end function
    integer(c_int) function rusparseGetBackend(handle, backend) bind(C, name="rusparseGetBackend")
      import :: c_int, c_ptr
      type(c_ptr), value :: handle
      integer(c_int), intent(out) :: backend
    end function
    integer(c_int) function rusparseSetNumThreads(handle, num_threads) &
        bind(C, name="rusparseSetNumThreads")
      import :: c_int, c_ptr
      type(c_ptr), value :: handle
      integer(c_int), value :: num_threads
    end function
    integer(c_int) function rusparseGetNumThreads(handle, num_threads) &
        bind(C, name="rusparseGetNumThreads")
      import :: c_int, c_ptr
      type(c_ptr), value :: handle
      integer(c_int), intent(out) :: num_threads
    end function
    ! CPU scratch kept between products (a rusparse extension)
    integer(c_int) function rusparseSetScratchLimit(handle, bytes) &
        bind(C, name="rusparseSetScratchLimit")
      import :: c_int, c_ptr, c_size_t
      type(c_ptr), value :: handle
      integer(c_size_t), value :: bytes
    end function
    integer(c_int) function rusparseGetScratchSize(handle, kept_bytes, limit_bytes) &
        bind(C, name="rusparseGetScratchSize")
      import :: c_int, c_ptr, c_size_t
      type(c_ptr), value :: handle
      integer(c_size_t), intent(out) :: kept_bytes, limit_bytes
    end function
    ! memory budget of a handle's products (a rusparse extension; 0: none)
    integer(c_int) function rusparseSetMemoryBudget(handle, bytes) &
        bind(C, name="rusparseSetMemoryBudget")
      import :: c_int, c_ptr, c_size_t
      type(c_ptr), value :: handle
      integer(c_size_t), value :: bytes
    end function
    integer(c_int) function rusparseGetMemoryBudget(handle, bytes) &
        bind(C, name="rusparseGetMemoryBudget")
      import :: c_int, c_ptr, c_size_t
      type(c_ptr), value :: handle
      integer(c_size_t), intent(out) :: bytes
    end function
    ! allocator hooks (a rusparse extension): C_FUNLOC of bind(C) functions,
    ! or C_NULL_FUNPTR for rusparse's own memory; see docs/memory.md
    integer(c_int) function rusparseSetAllocator(handle, hostAlloc, hostFree, &
        deviceAlloc, deviceFree, userCtx) bind(C, name="rusparseSetAllocator")
      import :: c_int, c_ptr, c_funptr
      type(c_ptr), value :: handle
      type(c_funptr), value :: hostAlloc, hostFree, deviceAlloc, deviceFree
      type(c_ptr), value :: userCtx
    end function
    integer(c_int) function rusparseGetAllocator(handle, hostAlloc, hostFree, &
        deviceAlloc, deviceFree, userCtx) bind(C, name="rusparseGetAllocator")
      import :: c_int, c_ptr, c_funptr
      type(c_ptr), value :: handle
      type(c_funptr), intent(out) :: hostAlloc, hostFree, deviceAlloc, deviceFree
      type(c_ptr), intent(out) :: userCtx
    end function
    integer(c_int) function rusparseTrimScratch(handle) bind(C, name="rusparseTrimScratch")
      import :: c_int, c_ptr
      type(c_ptr), value :: handle
    end function

    ! Sparse matrix descriptors
    integer(c_int) function rusparseCreateCsr(descr, rows, cols, nnz, row_offsets, col_ind, &
        values, row_offsets_type, col_ind_type, idx_base, value_type) &
        bind(C, name="rusparseCreateCsr")
      import :: c_int, c_int64_t, c_ptr
      type(c_ptr), intent(out) :: descr
      integer(c_int64_t), value :: rows, cols, nnz
      type(c_ptr), value :: row_offsets, col_ind, values
      integer(c_int), value :: row_offsets_type, col_ind_type, idx_base, value_type
    end function
    integer(c_int) function rusparseCreateConstCsr(descr, rows, cols, nnz, row_offsets, &
        col_ind, values, row_offsets_type, col_ind_type, idx_base, value_type) &
        bind(C, name="rusparseCreateConstCsr")
      import :: c_int, c_int64_t, c_ptr
      type(c_ptr), intent(out) :: descr
      integer(c_int64_t), value :: rows, cols, nnz
      type(c_ptr), value :: row_offsets, col_ind, values
      integer(c_int), value :: row_offsets_type, col_ind_type, idx_base, value_type
    end function
    integer(c_int) function rusparseDestroySpMat(descr) bind(C, name="rusparseDestroySpMat")
      import :: c_int, c_ptr
      type(c_ptr), value :: descr
    end function
    integer(c_int) function rusparseSpMatGetSize(descr, rows, cols, nnz) &
        bind(C, name="rusparseSpMatGetSize")
      import :: c_int, c_int64_t, c_ptr
      type(c_ptr), value :: descr
      integer(c_int64_t), intent(out) :: rows, cols, nnz
    end function
    integer(c_int) function rusparseCsrGet(descr, rows, cols, nnz, row_offsets, col_ind, values, &
        row_offsets_type, col_ind_type, idx_base, value_type) bind(C, name="rusparseCsrGet")
      import :: c_int, c_int64_t, c_ptr
      type(c_ptr), value :: descr
      integer(c_int64_t), intent(out) :: rows, cols, nnz
      type(c_ptr), intent(out) :: row_offsets, col_ind, values
      integer(c_int), intent(out) :: row_offsets_type, col_ind_type, idx_base, value_type
    end function
    integer(c_int) function rusparseConstCsrGet(descr, rows, cols, nnz, row_offsets, col_ind, &
        values, row_offsets_type, col_ind_type, idx_base, value_type) &
        bind(C, name="rusparseConstCsrGet")
      import :: c_int, c_int64_t, c_ptr
      type(c_ptr), value :: descr
      integer(c_int64_t), intent(out) :: rows, cols, nnz
      type(c_ptr), intent(out) :: row_offsets, col_ind, values
      integer(c_int), intent(out) :: row_offsets_type, col_ind_type, idx_base, value_type
    end function
    integer(c_int) function rusparseCsrSetPointers(descr, row_offsets, col_ind, values) &
        bind(C, name="rusparseCsrSetPointers")
      import :: c_int, c_ptr
      type(c_ptr), value :: descr, row_offsets, col_ind, values
    end function
    integer(c_int) function rusparseCsrSetSplitValues(descr, first_row_offsets, first_values, &
        second_row_offsets, second_values) bind(C, name="rusparseCsrSetSplitValues")
      import :: c_int, c_ptr
      type(c_ptr), value :: descr, first_row_offsets, first_values, second_row_offsets, second_values
    end function
    integer(c_int) function rusparseSpMatGetValues(descr, values) &
        bind(C, name="rusparseSpMatGetValues")
      import :: c_int, c_ptr
      type(c_ptr), value :: descr
      type(c_ptr), intent(out) :: values
    end function
    integer(c_int) function rusparseConstSpMatGetValues(descr, values) &
        bind(C, name="rusparseConstSpMatGetValues")
      import :: c_int, c_ptr
      type(c_ptr), value :: descr
      type(c_ptr), intent(out) :: values
    end function
    integer(c_int) function rusparseSpMatSetValues(descr, values) &
        bind(C, name="rusparseSpMatSetValues")
      import :: c_int, c_ptr
      type(c_ptr), value :: descr, values
    end function
    integer(c_int) function rusparseSpMatGetIndexBase(descr, idx_base) &
        bind(C, name="rusparseSpMatGetIndexBase")
      import :: c_int, c_ptr
      type(c_ptr), value :: descr
      integer(c_int), intent(out) :: idx_base
    end function

    ! SpGEMM
    integer(c_int) function rusparseSpGEMM_createDescr(descr) &
        bind(C, name="rusparseSpGEMM_createDescr")
      import :: c_int, c_ptr
      type(c_ptr), intent(out) :: descr
    end function
    integer(c_int) function rusparseSpGEMM_destroyDescr(descr) &
        bind(C, name="rusparseSpGEMM_destroyDescr")
      import :: c_int, c_ptr
      type(c_ptr), value :: descr
    end function
    integer(c_int) function rusparseSpGEMM_workEstimation(handle, op_a, op_b, alpha, mat_a, &
        mat_b, beta, mat_c, compute_type, alg, spgemm_descr, buffer_size1, external_buffer1) &
        bind(C, name="rusparseSpGEMM_workEstimation")
      import :: c_int, c_ptr, c_size_t
      type(c_ptr), value :: handle, alpha, mat_a, mat_b, beta, mat_c, spgemm_descr
      integer(c_int), value :: op_a, op_b, compute_type, alg
      integer(c_size_t), intent(inout) :: buffer_size1
      type(c_ptr), value :: external_buffer1
    end function
    integer(c_int) function rusparseSpGEMM_getNumProducts(spgemm_descr, num_prods) &
        bind(C, name="rusparseSpGEMM_getNumProducts")
      import :: c_int, c_int64_t, c_ptr
      type(c_ptr), value :: spgemm_descr
      integer(c_int64_t), intent(out) :: num_prods
    end function
    integer(c_int) function rusparseSpGEMM_predictNnz(handle, op_a, op_b, mat_a, mat_b, nnz) &
        bind(C, name="rusparseSpGEMM_predictNnz")
      import :: c_int, c_int64_t, c_ptr
      type(c_ptr), value :: handle, mat_a, mat_b
      integer(c_int), value :: op_a, op_b
      integer(c_int64_t), intent(out) :: nnz
    end function
    integer(c_int) function rusparseSpGEMM_getPlanInfo(spgemm_descr, backend, algorithm, &
        num_products, nnz_c) bind(C, name="rusparseSpGEMM_getPlanInfo")
      import :: c_int, c_int64_t, c_ptr
      type(c_ptr), value :: spgemm_descr
      integer(c_int), intent(out) :: backend, algorithm
      integer(c_int64_t), intent(out) :: num_products, nnz_c
    end function
    integer(c_int) function rusparseSpGEMM_getMemoryPlan(spgemm_descr, peak_bytes, concurrency) &
        bind(C, name="rusparseSpGEMM_getMemoryPlan")
      import :: c_int, c_int32_t, c_ptr, c_size_t
      type(c_ptr), value :: spgemm_descr
      integer(c_size_t), intent(out) :: peak_bytes
      integer(c_int32_t), intent(out) :: concurrency
    end function
    integer(c_int) function rusparseSpGEMM_setColumnOrder(spgemm_descr, order) &
        bind(C, name="rusparseSpGEMM_setColumnOrder")
      import :: c_int, c_ptr
      type(c_ptr), value :: spgemm_descr
      integer(c_int), value :: order
    end function
    integer(c_int) function rusparseSpGEMM_setPatternCheck(spgemm_descr, check) &
        bind(C, name="rusparseSpGEMM_setPatternCheck")
      import :: c_int, c_ptr
      type(c_ptr), value :: spgemm_descr
      integer(c_int), value :: check
    end function
    integer(c_int) function rusparseSpGEMM_setReuseCopyValues(spgemm_descr, enable) &
        bind(C, name="rusparseSpGEMM_setReuseCopyValues")
      import :: c_int, c_ptr
      type(c_ptr), value :: spgemm_descr
      integer(c_int), value :: enable
    end function
    integer(c_int) function rusparseSpGEMM_getBinCounts(spgemm_descr, which, rows_per_bin, &
        capacity, num_bins) bind(C, name="rusparseSpGEMM_getBinCounts")
      import :: c_int, c_int32_t, c_int64_t, c_ptr
      type(c_ptr), value :: spgemm_descr
      integer(c_int), value :: which
      integer(c_int64_t), intent(out) :: rows_per_bin(*)
      integer(c_int32_t), value :: capacity
      integer(c_int32_t), intent(out) :: num_bins
    end function
    integer(c_int) function rusparseSpGEMM_estimateMemory(handle, op_a, op_b, alpha, mat_a, &
        mat_b, beta, mat_c, compute_type, alg, spgemm_descr, chunk_fraction, buffer_size3, &
        external_buffer3, buffer_size2) bind(C, name="rusparseSpGEMM_estimateMemory")
      import :: c_int, c_ptr, c_size_t, c_float
      type(c_ptr), value :: handle, alpha, mat_a, mat_b, beta, mat_c, spgemm_descr
      integer(c_int), value :: op_a, op_b, compute_type, alg
      real(c_float), value :: chunk_fraction
      integer(c_size_t), intent(inout) :: buffer_size3
      type(c_ptr), value :: external_buffer3
      integer(c_size_t), intent(inout) :: buffer_size2
    end function
    integer(c_int) function rusparseSpGEMM_compute(handle, op_a, op_b, alpha, mat_a, mat_b, &
        beta, mat_c, compute_type, alg, spgemm_descr, buffer_size2, external_buffer2) &
        bind(C, name="rusparseSpGEMM_compute")
      import :: c_int, c_ptr, c_size_t
      type(c_ptr), value :: handle, alpha, mat_a, mat_b, beta, mat_c, spgemm_descr
      integer(c_int), value :: op_a, op_b, compute_type, alg
      integer(c_size_t), intent(inout) :: buffer_size2
      type(c_ptr), value :: external_buffer2
    end function
    integer(c_int) function rusparseSpGEMM_copy(handle, op_a, op_b, alpha, mat_a, mat_b, beta, &
        mat_c, compute_type, alg, spgemm_descr) bind(C, name="rusparseSpGEMM_copy")
      import :: c_int, c_ptr
      type(c_ptr), value :: handle, alpha, mat_a, mat_b, beta, mat_c, spgemm_descr
      integer(c_int), value :: op_a, op_b, compute_type, alg
    end function

    ! SpGEMM with reuse
    integer(c_int) function rusparseSpGEMMreuse_workEstimation(handle, op_a, op_b, mat_a, &
        mat_b, mat_c, alg, spgemm_descr, buffer_size1, external_buffer1) &
        bind(C, name="rusparseSpGEMMreuse_workEstimation")
      import :: c_int, c_ptr, c_size_t
      type(c_ptr), value :: handle, mat_a, mat_b, mat_c, spgemm_descr
      integer(c_int), value :: op_a, op_b, alg
      integer(c_size_t), intent(inout) :: buffer_size1
      type(c_ptr), value :: external_buffer1
    end function
    integer(c_int) function rusparseSpGEMMreuse_nnz(handle, op_a, op_b, mat_a, mat_b, mat_c, &
        alg, spgemm_descr, buffer_size2, external_buffer2, buffer_size3, external_buffer3, &
        buffer_size4, external_buffer4) bind(C, name="rusparseSpGEMMreuse_nnz")
      import :: c_int, c_ptr, c_size_t
      type(c_ptr), value :: handle, mat_a, mat_b, mat_c, spgemm_descr
      integer(c_int), value :: op_a, op_b, alg
      integer(c_size_t), intent(inout) :: buffer_size2, buffer_size3, buffer_size4
      type(c_ptr), value :: external_buffer2, external_buffer3, external_buffer4
    end function
    integer(c_int) function rusparseSpGEMMreuse_copy(handle, op_a, op_b, mat_a, mat_b, mat_c, &
        alg, spgemm_descr, buffer_size5, external_buffer5) &
        bind(C, name="rusparseSpGEMMreuse_copy")
      import :: c_int, c_ptr, c_size_t
      type(c_ptr), value :: handle, mat_a, mat_b, mat_c, spgemm_descr
      integer(c_int), value :: op_a, op_b, alg
      integer(c_size_t), intent(inout) :: buffer_size5
      type(c_ptr), value :: external_buffer5
    end function
    integer(c_int) function rusparseSpGEMMreuse_compute(handle, op_a, op_b, alpha, mat_a, &
        mat_b, beta, mat_c, compute_type, alg, spgemm_descr) &
        bind(C, name="rusparseSpGEMMreuse_compute")
      import :: c_int, c_ptr
      type(c_ptr), value :: handle, alpha, mat_a, mat_b, beta, mat_c, spgemm_descr
      integer(c_int), value :: op_a, op_b, compute_type, alg
    end function

    ! strlen, for the messages
    integer(c_size_t) function rusparse_c_strlen(s) bind(C, name="strlen")
      import :: c_size_t, c_ptr
      type(c_ptr), value :: s
    end function
  end interface

  ! ---- Helpers ---------------------------------------------------------------
  !> Describes a one-based (or `base`-based) CSR matrix held in Fortran
  !> arrays: nrows = size(row_ptr) - 1, nnz = size(col_ind). Arrays longer
  !> than row_ptr(nrows + 1) - base needs (preallocated work arrays) are
  !> fine: the entries past it are spare room, never read.
  interface rusparse_create_csr
    module procedure create_csr_i32_r32, create_csr_i32_r64, create_csr_i32_c32, &
      create_csr_i32_c64, create_csr_i64_r32, create_csr_i64_r64, create_csr_i64_c32, &
      create_csr_i64_c64
  end interface

  !> C = alpha * op(A) * op(B) for one-based int32 CSR arrays, C's arrays
  !> allocated here.
  interface rusparse_multiply
    module procedure multiply_i32_r64, multiply_i32_c64
  end interface

  !> What one rusparse_multiply holds between its phases.
  type :: product_state
    type(c_ptr) :: handle = c_null_ptr
    type(c_ptr) :: a = c_null_ptr, b = c_null_ptr, c = c_null_ptr, descr = c_null_ptr
    logical :: own_handle = .false.
    integer(c_int) :: op_a = RUSPARSE_OPERATION_NON_TRANSPOSE
    integer(c_int) :: op_b = RUSPARSE_OPERATION_NON_TRANSPOSE
    integer(c_int) :: value_type = RUSPARSE_R_64F
    type(c_ptr) :: alpha = c_null_ptr, beta = c_null_ptr
    integer(c_int8_t), allocatable :: buffer1(:), buffer2(:)
  end type

  ! The message of a helper's own argument check (empty: none).
  character(len=:), allocatable, save :: helper_message

contains

  !> The message of the last failed call: the library's
  !> (rusparseGetLastErrorMessage, per thread; a successful call clears it)
  !> or, when that is empty, the last helper's own (a size check, or the
  !> first failure inside rusparse_multiply).
  function rusparse_last_error() result(msg)
    character(len=:), allocatable :: msg
    character(kind=c_char), pointer :: chars(:)
    type(c_ptr) :: p
    integer :: n, i
    p = rusparseGetLastErrorMessage()
    n = 0
    if (c_associated(p)) n = int(rusparse_c_strlen(p))
    allocate (character(len=n) :: msg)
    if (n > 0) then
      call c_f_pointer(p, chars, [n])
      do i = 1, n
        msg(i:i) = chars(i)
      end do
    end if
    if (len(msg) == 0 .and. allocated(helper_message)) msg = helper_message
  end function

  !> The name of a status, e.g. "RUSPARSE_STATUS_INVALID_VALUE".
  function rusparse_status_name(status) result(name)
    integer(c_int), intent(in) :: status
    character(len=:), allocatable :: name
    character(kind=c_char), pointer :: chars(:)
    type(c_ptr) :: p
    integer :: n, i
    p = rusparseGetErrorName(status)
    n = int(rusparse_c_strlen(p))
    call c_f_pointer(p, chars, [n])
    allocate (character(len=n) :: name)
    do i = 1, n
      name(i:i) = chars(i)
    end do
  end function

  subroutine set_helper_error(msg)
    character(len=*), intent(in) :: msg
    helper_message = msg
  end subroutine

  integer(c_int) function helper_error(msg) result(status)
    character(len=*), intent(in) :: msg
    call set_helper_error(msg)
    status = RUSPARSE_STATUS_INVALID_VALUE
  end function

  !> rusparseCreateCsr from addresses, after the helpers' size checks.
  integer(c_int) function create_csr_raw(descr, ncols, nrows, nnz, nvals, row_ptr, col_ind, &
      values, index_type, value_type, base) result(status)
    type(c_ptr), intent(out) :: descr
    integer(c_int64_t), intent(in) :: ncols, nrows, nnz, nvals
    type(c_ptr), intent(in) :: row_ptr, col_ind, values
    integer(c_int), intent(in) :: index_type, value_type
    integer(c_int), intent(in), optional :: base
    integer(c_int) :: b
    descr = c_null_ptr
    call set_helper_error("")
    b = RUSPARSE_INDEX_BASE_ONE
    if (present(base)) b = base
    if (nrows < 0) then
      status = helper_error("rusparse_create_csr: row_ptr is empty; it needs nrows + 1 entries")
      return
    end if
    if (nvals /= nnz) then
      status = helper_error("rusparse_create_csr: values and col_ind differ in size")
      return
    end if
    if (nnz == 0) then
      status = rusparseCreateCsr(descr, nrows, ncols, nnz, row_ptr, c_null_ptr, c_null_ptr, &
                                 index_type, index_type, b, value_type)
    else
      status = rusparseCreateCsr(descr, nrows, ncols, nnz, row_ptr, col_ind, values, &
                                 index_type, index_type, b, value_type)
    end if
  end function

  integer(c_int) function create_csr_i32_r32(descr, ncols, row_ptr, col_ind, values, base) &
      result(status)
    type(c_ptr), intent(out) :: descr
    integer, intent(in) :: ncols
    integer(c_int32_t), intent(in), target, contiguous :: row_ptr(:), col_ind(:)
    real(c_float), intent(in), target, contiguous :: values(:)
    integer(c_int), intent(in), optional :: base
    status = create_csr_raw(descr, int(ncols, c_int64_t), size(row_ptr, kind=c_int64_t) - 1, &
      size(col_ind, kind=c_int64_t), size(values, kind=c_int64_t), c_loc(row_ptr), &
      c_loc(col_ind), c_loc(values), RUSPARSE_INDEX_32I, RUSPARSE_R_32F, base)
  end function

  integer(c_int) function create_csr_i32_r64(descr, ncols, row_ptr, col_ind, values, base) &
      result(status)
    type(c_ptr), intent(out) :: descr
    integer, intent(in) :: ncols
    integer(c_int32_t), intent(in), target, contiguous :: row_ptr(:), col_ind(:)
    real(c_double), intent(in), target, contiguous :: values(:)
    integer(c_int), intent(in), optional :: base
    status = create_csr_raw(descr, int(ncols, c_int64_t), size(row_ptr, kind=c_int64_t) - 1, &
      size(col_ind, kind=c_int64_t), size(values, kind=c_int64_t), c_loc(row_ptr), &
      c_loc(col_ind), c_loc(values), RUSPARSE_INDEX_32I, RUSPARSE_R_64F, base)
  end function

  integer(c_int) function create_csr_i32_c32(descr, ncols, row_ptr, col_ind, values, base) &
      result(status)
    type(c_ptr), intent(out) :: descr
    integer, intent(in) :: ncols
    integer(c_int32_t), intent(in), target, contiguous :: row_ptr(:), col_ind(:)
    complex(c_float_complex), intent(in), target, contiguous :: values(:)
    integer(c_int), intent(in), optional :: base
    status = create_csr_raw(descr, int(ncols, c_int64_t), size(row_ptr, kind=c_int64_t) - 1, &
      size(col_ind, kind=c_int64_t), size(values, kind=c_int64_t), c_loc(row_ptr), &
      c_loc(col_ind), c_loc(values), RUSPARSE_INDEX_32I, RUSPARSE_C_32F, base)
  end function

  integer(c_int) function create_csr_i32_c64(descr, ncols, row_ptr, col_ind, values, base) &
      result(status)
    type(c_ptr), intent(out) :: descr
    integer, intent(in) :: ncols
    integer(c_int32_t), intent(in), target, contiguous :: row_ptr(:), col_ind(:)
    complex(c_double_complex), intent(in), target, contiguous :: values(:)
    integer(c_int), intent(in), optional :: base
    status = create_csr_raw(descr, int(ncols, c_int64_t), size(row_ptr, kind=c_int64_t) - 1, &
      size(col_ind, kind=c_int64_t), size(values, kind=c_int64_t), c_loc(row_ptr), &
      c_loc(col_ind), c_loc(values), RUSPARSE_INDEX_32I, RUSPARSE_C_64F, base)
  end function

  integer(c_int) function create_csr_i64_r32(descr, ncols, row_ptr, col_ind, values, base) &
      result(status)
    type(c_ptr), intent(out) :: descr
    integer(c_int64_t), intent(in) :: ncols
    integer(c_int64_t), intent(in), target, contiguous :: row_ptr(:), col_ind(:)
    real(c_float), intent(in), target, contiguous :: values(:)
    integer(c_int), intent(in), optional :: base
    status = create_csr_raw(descr, ncols, size(row_ptr, kind=c_int64_t) - 1, &
      size(col_ind, kind=c_int64_t), size(values, kind=c_int64_t), c_loc(row_ptr), &
      c_loc(col_ind), c_loc(values), RUSPARSE_INDEX_64I, RUSPARSE_R_32F, base)
  end function

  integer(c_int) function create_csr_i64_r64(descr, ncols, row_ptr, col_ind, values, base) &
      result(status)
    type(c_ptr), intent(out) :: descr
    integer(c_int64_t), intent(in) :: ncols
    integer(c_int64_t), intent(in), target, contiguous :: row_ptr(:), col_ind(:)
    real(c_double), intent(in), target, contiguous :: values(:)
    integer(c_int), intent(in), optional :: base
    status = create_csr_raw(descr, ncols, size(row_ptr, kind=c_int64_t) - 1, &
      size(col_ind, kind=c_int64_t), size(values, kind=c_int64_t), c_loc(row_ptr), &
      c_loc(col_ind), c_loc(values), RUSPARSE_INDEX_64I, RUSPARSE_R_64F, base)
  end function

  integer(c_int) function create_csr_i64_c32(descr, ncols, row_ptr, col_ind, values, base) &
      result(status)
    type(c_ptr), intent(out) :: descr
    integer(c_int64_t), intent(in) :: ncols
    integer(c_int64_t), intent(in), target, contiguous :: row_ptr(:), col_ind(:)
    complex(c_float_complex), intent(in), target, contiguous :: values(:)
    integer(c_int), intent(in), optional :: base
    status = create_csr_raw(descr, ncols, size(row_ptr, kind=c_int64_t) - 1, &
      size(col_ind, kind=c_int64_t), size(values, kind=c_int64_t), c_loc(row_ptr), &
      c_loc(col_ind), c_loc(values), RUSPARSE_INDEX_64I, RUSPARSE_C_32F, base)
  end function

  integer(c_int) function create_csr_i64_c64(descr, ncols, row_ptr, col_ind, values, base) &
      result(status)
    type(c_ptr), intent(out) :: descr
    integer(c_int64_t), intent(in) :: ncols
    integer(c_int64_t), intent(in), target, contiguous :: row_ptr(:), col_ind(:)
    complex(c_double_complex), intent(in), target, contiguous :: values(:)
    integer(c_int), intent(in), optional :: base
    status = create_csr_raw(descr, ncols, size(row_ptr, kind=c_int64_t) - 1, &
      size(col_ind, kind=c_int64_t), size(values, kind=c_int64_t), c_loc(row_ptr), &
      c_loc(col_ind), c_loc(values), RUSPARSE_INDEX_64I, RUSPARSE_C_64F, base)
  end function

  ! Rows and columns of op(X) for X with `nrows` rows and `ncols` columns.
  integer function op_rows(op, nrows, ncols)
    integer(c_int), intent(in) :: op
    integer, intent(in) :: nrows, ncols
    op_rows = nrows
    if (op /= RUSPARSE_OPERATION_NON_TRANSPOSE) op_rows = ncols
  end function

  integer function op_cols(op, nrows, ncols)
    integer(c_int), intent(in) :: op
    integer, intent(in) :: nrows, ncols
    op_cols = op_rows(op, ncols, nrows)
  end function

  !> rusparse_multiply's set-up: value type, alpha and beta (addresses of
  !> the caller's scalars) and the operations.
  subroutine init_product(st, value_type, alpha, beta, op_a, op_b)
    type(product_state), intent(inout) :: st
    integer(c_int), intent(in) :: value_type
    type(c_ptr), intent(in) :: alpha, beta
    integer(c_int), intent(in), optional :: op_a, op_b
    st%value_type = value_type
    st%alpha = alpha
    st%beta = beta
    if (present(op_a)) st%op_a = op_a
    if (present(op_b)) st%op_b = op_b
  end subroutine

  !> rusparse_multiply's first half, after st%a and st%b were described:
  !> C's descriptor and row pointer (allocated here), work estimation and
  !> compute; returns nnz(C).
  integer(c_int) function start_product(st, a_nrows, a_ncols, b_nrows, b_ncols, c_rows, nnz, &
      handle) result(status)
    type(product_state), intent(inout), target :: st
    integer, intent(in) :: a_nrows, a_ncols, b_nrows, b_ncols
    integer(c_int32_t), intent(out), allocatable, target :: c_rows(:)
    integer(c_int64_t), intent(out) :: nnz
    type(c_ptr), intent(in), optional :: handle
    integer(c_size_t) :: size1, size2
    integer(c_int64_t) :: rows, cols
    integer :: m, n
    nnz = 0
    m = op_rows(st%op_a, a_nrows, a_ncols)
    n = op_cols(st%op_b, b_nrows, b_ncols)
    allocate (c_rows(max(m, 0) + 1))
    c_rows = 1
    if (present(handle)) then
      st%handle = handle
    else
      status = rusparseCreate(st%handle)
      if (status /= RUSPARSE_STATUS_SUCCESS) return
      st%own_handle = .true.
    end if
    status = rusparseCreateCsr(st%c, int(m, c_int64_t), int(n, c_int64_t), 0_c_int64_t, &
      c_loc(c_rows), c_null_ptr, c_null_ptr, RUSPARSE_INDEX_32I, RUSPARSE_INDEX_32I, &
      RUSPARSE_INDEX_BASE_ONE, st%value_type)
    if (status /= RUSPARSE_STATUS_SUCCESS) return
    status = rusparseSpGEMM_createDescr(st%descr)
    if (status /= RUSPARSE_STATUS_SUCCESS) return
    size1 = 0
    status = rusparseSpGEMM_workEstimation(st%handle, st%op_a, st%op_b, st%alpha, st%a, st%b, &
      st%beta, st%c, st%value_type, RUSPARSE_SPGEMM_DEFAULT, st%descr, size1, c_null_ptr)
    if (status /= RUSPARSE_STATUS_SUCCESS) return
    allocate (st%buffer1(max(size1, 1_c_size_t)))
    status = rusparseSpGEMM_workEstimation(st%handle, st%op_a, st%op_b, st%alpha, st%a, st%b, &
      st%beta, st%c, st%value_type, RUSPARSE_SPGEMM_DEFAULT, st%descr, size1, &
      c_loc(st%buffer1))
    if (status /= RUSPARSE_STATUS_SUCCESS) return
    size2 = 0
    status = rusparseSpGEMM_compute(st%handle, st%op_a, st%op_b, st%alpha, st%a, st%b, &
      st%beta, st%c, st%value_type, RUSPARSE_SPGEMM_DEFAULT, st%descr, size2, c_null_ptr)
    if (status /= RUSPARSE_STATUS_SUCCESS) return
    allocate (st%buffer2(max(size2, 1_c_size_t)))
    status = rusparseSpGEMM_compute(st%handle, st%op_a, st%op_b, st%alpha, st%a, st%b, &
      st%beta, st%c, st%value_type, RUSPARSE_SPGEMM_DEFAULT, st%descr, size2, &
      c_loc(st%buffer2))
    if (status /= RUSPARSE_STATUS_SUCCESS) return
    status = rusparseSpMatGetSize(st%c, rows, cols, nnz)
  end function

  !> rusparse_multiply's second half: C's arrays, then copy.
  integer(c_int) function finish_product(st, c_rows, c_cols, c_vals, nnz) result(status)
    type(product_state), intent(inout) :: st
    type(c_ptr), intent(in) :: c_rows, c_cols, c_vals
    integer(c_int64_t), intent(in) :: nnz
    if (nnz == 0) then
      status = rusparseCsrSetPointers(st%c, c_rows, c_null_ptr, c_null_ptr)
    else
      status = rusparseCsrSetPointers(st%c, c_rows, c_cols, c_vals)
    end if
    if (status /= RUSPARSE_STATUS_SUCCESS) return
    status = rusparseSpGEMM_copy(st%handle, st%op_a, st%op_b, st%alpha, st%a, st%b, st%beta, &
      st%c, st%value_type, RUSPARSE_SPGEMM_DEFAULT, st%descr)
  end function

  !> Frees what start_product made. After a failure (`status`), its message
  !> is kept for rusparse_last_error (the destroy calls clear the library's).
  subroutine release_product(st, status)
    type(product_state), intent(inout) :: st
    integer(c_int), intent(in) :: status
    integer(c_int) :: ignored
    if (status /= RUSPARSE_STATUS_SUCCESS) call set_helper_error(rusparse_last_error())
    if (c_associated(st%descr)) ignored = rusparseSpGEMM_destroyDescr(st%descr)
    if (c_associated(st%a)) ignored = rusparseDestroySpMat(st%a)
    if (c_associated(st%b)) ignored = rusparseDestroySpMat(st%b)
    if (c_associated(st%c)) ignored = rusparseDestroySpMat(st%c)
    if (st%own_handle) ignored = rusparseDestroy(st%handle)
  end subroutine

  !> C = alpha * op(A) * op(B), real(c_double), one-based int32 arrays.
  !> A has size(a_rows) - 1 rows and a_ncols columns; B likewise. C's
  !> arrays are allocated here (c_rows: rows of op(A) + 1; c_cols, c_vals:
  !> nnz(C)), one-based, rows sorted. `op_a`/`op_b` default to
  !> RUSPARSE_OPERATION_NON_TRANSPOSE, `alpha` to 1; without `handle` an
  !> AUTO handle is made for the call. Returns a rusparse status;
  !> rusparse_last_error() says why a call failed.
  integer(c_int) function multiply_i32_r64(a_ncols, a_rows, a_cols, a_vals, b_ncols, b_rows, &
      b_cols, b_vals, c_rows, c_cols, c_vals, op_a, op_b, alpha, handle) result(status)
    integer, intent(in) :: a_ncols, b_ncols
    integer(c_int32_t), intent(in), target, contiguous :: a_rows(:), a_cols(:), b_rows(:), &
      b_cols(:)
    real(c_double), intent(in), target, contiguous :: a_vals(:), b_vals(:)
    integer(c_int32_t), intent(out), allocatable, target :: c_rows(:), c_cols(:)
    real(c_double), intent(out), allocatable, target :: c_vals(:)
    integer(c_int), intent(in), optional :: op_a, op_b
    real(c_double), intent(in), optional :: alpha
    type(c_ptr), intent(in), optional :: handle
    type(product_state), target :: st
    real(c_double), target :: scalars(2)
    integer(c_int64_t) :: nnz
    scalars = [1.0_c_double, 0.0_c_double]
    if (present(alpha)) scalars(1) = alpha
    call init_product(st, RUSPARSE_R_64F, c_loc(scalars(1)), c_loc(scalars(2)), op_a, op_b)
    status = rusparse_create_csr(st%a, a_ncols, a_rows, a_cols, a_vals)
    if (status == RUSPARSE_STATUS_SUCCESS) &
      status = rusparse_create_csr(st%b, b_ncols, b_rows, b_cols, b_vals)
    if (status == RUSPARSE_STATUS_SUCCESS) &
      status = start_product(st, size(a_rows) - 1, a_ncols, size(b_rows) - 1, b_ncols, c_rows, &
                             nnz, handle)
    if (status == RUSPARSE_STATUS_SUCCESS) then
      allocate (c_cols(nnz), c_vals(nnz))
      status = finish_product(st, c_loc(c_rows), c_loc(c_cols), c_loc(c_vals), nnz)
    end if
    call release_product(st, status)
  end function

  !> rusparse_multiply for complex(c_double) values (see multiply_i32_r64);
  !> op RUSPARSE_OPERATION_CONJUGATE_TRANSPOSE conjugates.
  integer(c_int) function multiply_i32_c64(a_ncols, a_rows, a_cols, a_vals, b_ncols, b_rows, &
      b_cols, b_vals, c_rows, c_cols, c_vals, op_a, op_b, alpha, handle) result(status)
    integer, intent(in) :: a_ncols, b_ncols
    integer(c_int32_t), intent(in), target, contiguous :: a_rows(:), a_cols(:), b_rows(:), &
      b_cols(:)
    complex(c_double_complex), intent(in), target, contiguous :: a_vals(:), b_vals(:)
    integer(c_int32_t), intent(out), allocatable, target :: c_rows(:), c_cols(:)
    complex(c_double_complex), intent(out), allocatable, target :: c_vals(:)
    integer(c_int), intent(in), optional :: op_a, op_b
    complex(c_double_complex), intent(in), optional :: alpha
    type(c_ptr), intent(in), optional :: handle
    type(product_state), target :: st
    complex(c_double_complex), target :: scalars(2)
    integer(c_int64_t) :: nnz
    scalars = [(1.0_c_double, 0.0_c_double), (0.0_c_double, 0.0_c_double)]
    if (present(alpha)) scalars(1) = alpha
    call init_product(st, RUSPARSE_C_64F, c_loc(scalars(1)), c_loc(scalars(2)), op_a, op_b)
    status = rusparse_create_csr(st%a, a_ncols, a_rows, a_cols, a_vals)
    if (status == RUSPARSE_STATUS_SUCCESS) &
      status = rusparse_create_csr(st%b, b_ncols, b_rows, b_cols, b_vals)
    if (status == RUSPARSE_STATUS_SUCCESS) &
      status = start_product(st, size(a_rows) - 1, a_ncols, size(b_rows) - 1, b_ncols, c_rows, &
                             nnz, handle)
    if (status == RUSPARSE_STATUS_SUCCESS) then
      allocate (c_cols(nnz), c_vals(nnz))
      status = finish_product(st, c_loc(c_rows), c_loc(c_cols), c_loc(c_vals), nnz)
    end if
    call release_product(st, status)
  end function

end module rusparse
