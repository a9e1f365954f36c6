// C++17 use of rusparse.h: the header compiles as C++ (extern "C", enums,
// opaque handles) and one tiny product links and runs.
//
//   A = [1 2]   B = [3 0]   C = A * B = [3 8]
//       [0 4]       [0 4]               [0 16]
#include "rusparse.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace {

void check(rusparseStatus_t status, const char *what, int line) {
    if (status != RUSPARSE_STATUS_SUCCESS) {
        std::fprintf(stderr, "cxx_compile.cpp:%d: %s returned %s: %s\n", line, what,
                     rusparseGetErrorName(status), rusparseGetLastErrorMessage());
        std::exit(1);
    }
}
#define CHECK(call) check((call), #call, __LINE__)

// RAII wrappers, as a C++ user would write them.
struct Handle {
    rusparseHandle_t h = nullptr;
    Handle() { CHECK(rusparseCreate(&h)); }
    ~Handle() { rusparseDestroy(h); }
    Handle(const Handle &) = delete;
    Handle &operator=(const Handle &) = delete;
};

}  // namespace

int main() {
    static_assert(RUSPARSE_VERSION == RUSPARSE_VER_MAJOR * 1000 + RUSPARSE_VER_MINOR * 100 + RUSPARSE_VER_PATCH,
                  "RUSPARSE_VERSION");
    static_assert(RUSPARSE_STATUS_NOT_SUPPORTED == 10 && RUSPARSE_C_64F == 5 && RUSPARSE_R_16BF == 14 &&
                      RUSPARSE_SPGEMM_ALG3 == 5 && RUSPARSE_INDEX_64I == 3,
                  "cuSPARSE's enumerator numbers");
    static_assert(RUSPARSE_STATUS_INSUFFICIENT_RESOURCES == 11 && RUSPARSE_MAX_THREADS >= 1,
                  "the last status and the thread limit");

    Handle handle;
    int version = 0;
    CHECK(rusparseGetVersion(handle.h, &version));
    if (version != RUSPARSE_VERSION) {
        std::fprintf(stderr, "version %d != %d\n", version, RUSPARSE_VERSION);
        return 1;
    }

    std::vector<std::int32_t> a_off{0, 2, 3}, a_col{0, 1, 1}, b_off{0, 1, 2}, b_col{0, 1};
    std::vector<double> a_val{1, 2, 4}, b_val{3, 4};
    rusparseConstSpMatDescr_t A = nullptr, B = nullptr;
    rusparseSpMatDescr_t C = nullptr;
    CHECK(rusparseCreateConstCsr(&A, 2, 2, 3, a_off.data(), a_col.data(), a_val.data(), RUSPARSE_INDEX_32I,
                                 RUSPARSE_INDEX_32I, RUSPARSE_INDEX_BASE_ZERO, RUSPARSE_R_64F));
    CHECK(rusparseCreateConstCsr(&B, 2, 2, 2, b_off.data(), b_col.data(), b_val.data(), RUSPARSE_INDEX_32I,
                                 RUSPARSE_INDEX_32I, RUSPARSE_INDEX_BASE_ZERO, RUSPARSE_R_64F));
    CHECK(rusparseCreateCsr(&C, 2, 2, 0, nullptr, nullptr, nullptr, RUSPARSE_INDEX_32I, RUSPARSE_INDEX_32I,
                            RUSPARSE_INDEX_BASE_ZERO, RUSPARSE_R_64F));
    rusparseSpGEMMDescr_t descr = nullptr;
    CHECK(rusparseSpGEMM_createDescr(&descr));

    const double alpha = 1.0, beta = 0.0;
    const auto op = RUSPARSE_OPERATION_NON_TRANSPOSE;
    const auto alg = RUSPARSE_SPGEMM_DEFAULT;
    std::size_t size1 = 0, size2 = 0;
    CHECK(rusparseSpGEMM_workEstimation(handle.h, op, op, &alpha, A, B, &beta, C, RUSPARSE_R_64F, alg, descr,
                                        &size1, nullptr));
    std::vector<unsigned char> buffer1(size1);
    CHECK(rusparseSpGEMM_workEstimation(handle.h, op, op, &alpha, A, B, &beta, C, RUSPARSE_R_64F, alg, descr,
                                        &size1, buffer1.data()));
    CHECK(rusparseSpGEMM_compute(handle.h, op, op, &alpha, A, B, &beta, C, RUSPARSE_R_64F, alg, descr, &size2,
                                 nullptr));
    std::vector<unsigned char> buffer2(size2);
    CHECK(rusparseSpGEMM_compute(handle.h, op, op, &alpha, A, B, &beta, C, RUSPARSE_R_64F, alg, descr, &size2,
                                 buffer2.data()));
    std::int64_t rows = 0, cols = 0, nnz = 0;
    CHECK(rusparseSpMatGetSize(C, &rows, &cols, &nnz));
    std::vector<std::int32_t> c_off(static_cast<std::size_t>(rows + 1)), c_col(static_cast<std::size_t>(nnz));
    std::vector<double> c_val(static_cast<std::size_t>(nnz));
    CHECK(rusparseCsrSetPointers(C, c_off.data(), c_col.data(), c_val.data()));
    CHECK(rusparseSpGEMM_copy(handle.h, op, op, &alpha, A, B, &beta, C, RUSPARSE_R_64F, alg, descr));

    const std::vector<std::int32_t> want_off{0, 2, 3}, want_col{0, 1, 1};
    const std::vector<double> want_val{3, 8, 16};
    const bool ok = c_off == want_off && c_col == want_col && c_val == want_val;
    CHECK(rusparseSpGEMM_destroyDescr(descr));
    CHECK(rusparseDestroySpMat(A));
    CHECK(rusparseDestroySpMat(B));
    CHECK(rusparseDestroySpMat(C));
    if (!ok) {
        std::fprintf(stderr, "C++ product gave a wrong C\n");
        return 1;
    }
    std::printf("cxx_compile: C++17 product OK (rusparse %s)\n", RUSPARSE_VERSION_STRING);
    return 0;
}
