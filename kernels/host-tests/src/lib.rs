//! Host-emulated GPU kernels (see `kernels/README.md`).
