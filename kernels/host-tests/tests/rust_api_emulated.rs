//! The Rust API on a GPU context runs on that GPU, never silently on the
//! CPU: `Context::on_device` with an emulated device (H100 limits for the
//! warp-32 variants, MI50 / Hygon DCU limits for the wavefront-64 ones),
//! then `Context::spgemm` on host matrices. Each product is compared
//! exactly with `rusparse::reference` (integer-valued entries), the
//! device must have run kernels for it, and every device allocation must
//! be given back, also when one fails. An `SpgemmPlan` on such a context
//! runs there too (symbolic, numeric with beta, new values, the reuse
//! flow's structure and values); the CPU algorithms are refused, naming
//! the device.

use rusparse::backend::gpu::GpuDevice;
use rusparse::{
    reference, Algorithm, Context, Error, Index, IndexBase, Op, SpgemmOptions, SpgemmPlan,
};
use rusparse_kernel_host_tests::device::EmulatedDevice;
use rusparse_kernel_host_tests::hash::HostCsr;
use rusparse_kernel_host_tests::support::{random_rows, MESSY};
use rusparse_kernel_host_tests::{
    small_int_value, variant_rng, visit_variants, Kernels, Rng, TestValue, Variant, VariantVisitor,
};

type Val<V> = <V as Variant>::Value;

/// `nrows x ncols`, row `i` of 0 to 9 entries, with repeated columns and
/// rows out of order, and one row long enough for a larger bin.
fn messy<V: Variant>(rng: &mut Rng, nrows: usize, ncols: usize, base: i32) -> HostCsr<V> {
    let len = |rng: &mut Rng, i| {
        if i == 3 {
            2 * ncols
        } else {
            rng.below(10) as usize
        }
    };
    let rows = random_rows(rng, nrows, ncols, MESSY, len, small_int_value::<V>);
    HostCsr::from_rows(ncols, &rows, base)
}

fn options<T: TestValue>(op_a: Op, op_b: Op, algorithm: Algorithm) -> SpgemmOptions<T> {
    SpgemmOptions {
        op_a,
        op_b,
        alpha: T::from_parts(2.0, -1.0),
        algorithm,
        column_order: Default::default(),
    }
}

struct EveryVariant;

impl VariantVisitor for EveryVariant {
    fn visit<V: Kernels>(&mut self) {
        let dev = EmulatedDevice::for_variant::<V>();
        let ctx = Context::on_device(dev.clone()).expect("a context on the emulated device");
        let mut rng = variant_rng::<V>(25);
        // Each op, both bases and both kinds of plan, spread over four
        // products (each emulated product costs about 0.1 s).
        let cases = [
            (0, Op::N, Op::N, Algorithm::Default),
            (1, Op::T, Op::N, Algorithm::Deterministic),
            (0, Op::N, Op::T, Algorithm::Deterministic),
            (1, Op::C, Op::C, Algorithm::Default),
        ];
        for (base, op_a, op_b, algorithm) in cases {
            let a = messy::<V>(&mut rng, 29, 29, base);
            let b = messy::<V>(&mut rng, 29, 29, base);
            let opts = options::<Val<V>>(op_a, op_b, algorithm);
            let launches = dev.launches();
            let got = ctx
                .spgemm(&a.view(), &b.view(), &opts)
                .unwrap_or_else(|e| panic!("{}: {op_a:?} x {op_b:?}, base {base}: {e}", V::NAME));
            let want =
                reference::spgemm(&a.view(), op_a, &b.view(), op_b, opts.alpha).expect("reference");
            assert_eq!(got, want, "{}: {op_a:?} x {op_b:?}, base {base}", V::NAME);
            assert!(
                dev.launches() > launches,
                "{}: no kernel ran on the device",
                V::NAME
            );
            assert!(dev.live_allocations().is_empty(), "device memory left");
        }
        // Rectangular, and an empty operand.
        let a = messy::<V>(&mut rng, 5, 11, 0);
        let b = messy::<V>(&mut rng, 11, 3, 0);
        let opts = options::<Val<V>>(Op::N, Op::N, Algorithm::Default);
        let got = ctx
            .spgemm(&a.view(), &b.view(), &opts)
            .expect("5 x 11 by 11 x 3");
        let want = reference::spgemm(&a.view(), Op::N, &b.view(), Op::N, opts.alpha).unwrap();
        assert_eq!(got, want);
        let empty = HostCsr::<V>::from_rows(3, &vec![Vec::new(); 4], 1);
        let c = ctx
            .spgemm(&empty.view(), &b.view(), &opts)
            .expect_err("4 x 3 by 11 x 3");
        assert!(
            matches!(&c, Error::InvalidValue(m) if m.contains("op(A)")),
            "{c}"
        );
        let no_entries = HostCsr::<V>::from_rows(4, &vec![Vec::new(); 11], 0);
        let c = ctx
            .spgemm(&a.view(), &no_entries.view(), &opts)
            .expect("5 x 11 by an 11 x 4 matrix without entries");
        assert_eq!((c.nrows(), c.ncols(), c.col_indices().len()), (5, 4, 0));
        assert!(c.row_offsets().iter().all(|o| o.to_i64() == 0));
        assert_eq!(c.base(), IndexBase::Zero);
        assert!(dev.live_allocations().is_empty(), "device memory left");
    }
}

#[test]
fn context_spgemm_on_a_gpu_context_runs_on_the_gpu_and_matches_the_reference() {
    visit_variants(&mut EveryVariant);
}

/// The variant the single-variant tests below use.
type V = rusparse_kernel_host_tests::F64I32I32W32;

#[test]
fn a_plan_on_a_gpu_context_runs_every_phase_there() {
    let dev = EmulatedDevice::for_variant::<V>();
    let ctx = Context::on_device(dev.clone()).unwrap();
    assert_eq!(
        ctx.describe(),
        format!("Cuda device {}: emulated H100", dev.ordinal())
    );
    let mut rng = variant_rng::<V>(3);
    for (base, op_a) in [(0, Op::N), (1, Op::T)] {
        let a = messy::<V>(&mut rng, 23, 23, base);
        let b = messy::<V>(&mut rng, 23, 23, base);
        let (alpha, beta) = (2.0, -1.0);
        let want = reference::spgemm(&a.view(), op_a, &b.view(), Op::N, alpha).unwrap();
        let mut plan = SpgemmPlan::new(
            &ctx,
            &a.view(),
            op_a,
            &b.view(),
            Op::N,
            Algorithm::Deterministic,
        )
        .unwrap();
        assert_eq!(plan.selected_algorithm(), Algorithm::Deterministic);
        assert_eq!(plan.shape(), (want.nrows(), want.ncols()));
        assert!(plan.num_products() > 0 && plan.gpu_info().is_some());
        let e = plan.execute(&ctx, &a.view(), &b.view(), alpha).unwrap_err();
        assert!(
            matches!(&e, Error::InvalidValue(m) if m.contains("symbolic phase has not run")),
            "{e}"
        );
        let launches = dev.launches();
        let nnz = plan.symbolic(&ctx, &a.view(), &b.view()).unwrap();
        assert_eq!((nnz, plan.nnz()), (want.col_indices().len(), Some(nnz)));
        assert_eq!(
            plan.execute(&ctx, &a.view(), &b.view(), alpha).unwrap(),
            want
        );
        assert!(dev.launches() > launches, "no kernel ran on the device");

        // beta reads C's old values: C = alpha AB + beta (alpha AB).
        let (mut offsets, mut cols) = (vec![0i32; want.nrows() + 1], vec![0i32; nnz]);
        let mut values = want.values().to_vec();
        let out = rusparse::CsrOutput::full(&mut offsets, &mut cols, &mut values, a.view().base());
        plan.numeric(&ctx, &a.view(), &b.view(), alpha, beta, out)
            .unwrap();
        let scaled: Vec<f64> = want.values().iter().map(|v| v * (1.0 + beta)).collect();
        assert_eq!(
            (&offsets[..], &cols[..], &values[..]),
            (want.row_offsets(), want.col_indices(), &scaled[..])
        );

        // New values of A (same pattern): the plan copies them again.
        let mut a2 = a.clone();
        a2.vals.iter_mut().for_each(|v| *v *= 3.0);
        let want2 = reference::spgemm(&a2.view(), op_a, &b.view(), Op::N, alpha).unwrap();
        assert_eq!(
            plan.execute(&ctx, &a2.view(), &b.view(), alpha).unwrap(),
            want2
        );

        // The reuse flow: the structure, then the values on it.
        let (mut offsets, mut cols) = (vec![0i64; want.nrows() + 1], vec![0i32; nnz]);
        plan.write_structure(
            &ctx,
            &a.view(),
            &b.view(),
            &mut offsets,
            &mut cols,
            a.view().base(),
        )
        .unwrap();
        let wide: Vec<i64> = want.row_offsets().iter().map(|&o| i64::from(o)).collect();
        assert_eq!((&offsets[..], &cols[..]), (&wide[..], want.col_indices()));
        let mut values = vec![0.0; nnz];
        let out = rusparse::CsrOutput::<f64, i64, i32>::values_only(&mut values, a.view().base());
        plan.numeric(&ctx, &a2.view(), &b.view(), alpha, 0.0, out)
            .unwrap();
        assert_eq!(values, want2.values());
        let e = plan
            .write_row_offsets(&mut offsets, IndexBase::Zero)
            .unwrap_err();
        assert!(
            matches!(&e, Error::NotSupported(m) if m.contains("device memory")),
            "{e}"
        );
        drop(plan);
        assert!(dev.live_allocations().is_empty(), "device memory left");
    }
}

#[test]
fn cpu_algorithms_are_refused_naming_the_device() {
    let dev = EmulatedDevice::for_variant::<V>();
    let ctx = Context::on_device(dev.clone()).unwrap();
    let mut rng = variant_rng::<V>(3);
    let a = messy::<V>(&mut rng, 8, 8, 0);
    for algorithm in [
        Algorithm::Hash,
        Algorithm::BrmergePrecise,
        Algorithm::BrmergeUpper,
        Algorithm::Dense,
    ] {
        let e = ctx
            .spgemm(&a.view(), &a.view(), &options(Op::N, Op::N, algorithm))
            .expect_err("a CPU algorithm on a CUDA context");
        assert!(
            matches!(&e, Error::NotSupported(m)
                if m.contains("CPU algorithm") && m.contains("emulated H100")),
            "{e}"
        );
        let e = SpgemmPlan::new(&ctx, &a.view(), Op::N, &a.view(), Op::N, algorithm)
            .expect_err("a CPU algorithm in a plan on a CUDA context");
        assert!(
            matches!(&e, Error::NotSupported(m) if m.contains("CPU algorithm")),
            "{e}"
        );
    }
    assert_eq!(dev.launches(), 0, "a refused product launched kernels");
}

#[test]
fn a_failed_device_allocation_gives_everything_back() {
    let dev = EmulatedDevice::for_variant::<V>();
    let ctx = Context::on_device(dev.clone()).unwrap();
    let mut rng = variant_rng::<V>(4);
    let a = messy::<V>(&mut rng, 40, 40, 1);
    let opts = options::<f64>(Op::T, Op::N, Algorithm::Default);
    let want = reference::spgemm(&a.view(), Op::T, &a.view(), Op::N, opts.alpha).unwrap();
    let mut failures = 0;
    for k in 1.. {
        dev.fail_allocation(Some(k));
        let r = ctx.spgemm(&a.view(), &a.view(), &opts);
        dev.fail_allocation(None);
        assert!(
            dev.live_allocations().is_empty(),
            "allocation {k}: memory left"
        );
        match r {
            Ok(c) => {
                assert_eq!(c, want);
                break;
            }
            Err(Error::InsufficientResources(_)) => failures += 1,
            Err(e) => panic!("allocation {k}: {e}"),
        }
        assert!(k < 200, "no success after 200 failed allocations");
    }
    // The copies of A and B, the plan's metadata, the transpose, C's
    // arrays and the scalars: each was made to fail once.
    assert!(failures >= 5, "{failures} allocations");
}
