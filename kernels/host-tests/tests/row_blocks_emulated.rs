//! C larger than the GPU (emulated H100 with little memory): a product
//! whose C lives in host memory and does not fit on the device is computed
//! in row blocks copied to the host one by one, the device's memory never
//! passing its capacity (or the budget); the result equals the reference,
//! a second numeric phase with beta reads C's old values block by block,
//! a budget that cannot hold C's longest row is refused naming the
//! smallest that works, and with that budget the deterministic mode gives
//! the bits of the product computed whole.

use rusparse::{
    reference, Algorithm, Context, CsrMatrix, CsrOutput, Error, IndexBase, Op, SpgemmPlan,
};
use rusparse_kernel_host_tests::device::EmulatedDevice;
use rusparse_kernel_host_tests::hash::HostCsr;
use rusparse_kernel_host_tests::support::{self, random_rows, CANONICAL};
use rusparse_kernel_host_tests::{
    fractional_value, small_int_value, variant_rng, Rng, F64I32I32W32,
};

type V = F64I32I32W32;
type C = CsrMatrix<f64, i32, i32>;

/// A (250 x `k`, 2 entries a row, row 7 with `k`) times B (`k` x 20000,
/// 40 entries a row). With `k` = 50, C has about 20,000 entries (240 KB
/// with f64 values and i32 columns), over five times A and B together; with
/// `k` = 300, its row 7 (about 9,500 entries) runs with a global hash
/// table.
fn operands(rng: &mut Rng, k: usize, value: fn(&mut Rng) -> f64) -> (HostCsr<V>, HostCsr<V>) {
    let a_len = move |_: &mut Rng, i: usize| if i == 7 { k } else { 2 };
    let a = random_rows(rng, 250, k, CANONICAL, a_len, value);
    let b = random_rows(rng, k, 20_000, CANONICAL, |_, _| 40, value);
    (
        HostCsr::from_rows(k, &a, 0),
        HostCsr::from_rows(20_000, &b, 0),
    )
}

/// Bytes of `x`'s arrays (i32 offsets and columns, f64 values).
fn bytes(x: &CsrMatrix<f64, i32, i32>) -> usize {
    (x.nrows() + 1) * 4 + x.nnz() * 12
}

/// Runs the product through a plan with alpha = 1, beta = 0; then, if
/// `again`, a second numeric phase with alpha = 2, beta = 3 into the same
/// arrays. Returns C, the row blocks of the last numeric phase and the
/// device's peak beyond what it held before.
fn product(
    dev: &EmulatedDevice,
    ctx: &Context,
    (a, b): (&HostCsr<V>, &HostCsr<V>),
    algorithm: Algorithm,
    again: bool,
) -> Result<(C, usize, usize), Error> {
    let before = dev.live_bytes();
    dev.reset_peak();
    let r = (|| {
        let (a, b) = (a.view(), b.view());
        let mut plan = SpgemmPlan::new(ctx, &a, Op::N, &b, Op::N, algorithm)?;
        let nnz = plan.symbolic(ctx, &a, &b)?;
        let m = a.nrows();
        let (mut rows, mut cols, mut vals) = (vec![0i32; m + 1], vec![0i32; nnz], vec![0.0; nnz]);
        let mut run = |alpha: f64, beta: f64| {
            let out = CsrOutput::full(&mut rows, &mut cols, &mut vals, IndexBase::Zero);
            plan.numeric(ctx, &a, &b, alpha, beta, out)
        };
        run(1.0, 0.0)?;
        if again {
            run(2.0, 3.0)?;
        }
        let blocks = plan.gpu_info().expect("a GPU plan").row_blocks;
        let c = CsrMatrix::try_from_parts(m, b.ncols(), rows, cols, vals, IndexBase::Zero)?;
        Ok((c, blocks))
    })();
    assert!(dev.live_allocations().is_empty(), "device memory left");
    let peak = dev.peak_bytes() - before;
    r.map(|(c, blocks)| (c, blocks, peak))
}

#[test]
fn c_four_times_the_device_memory_is_computed_in_row_blocks() {
    let (a, b) = operands(&mut variant_rng::<V>(40), 50, small_int_value::<V>);
    let want = reference::spgemm(&a.view(), Op::N, &b.view(), Op::N, 1.0).unwrap();
    // C four times the device's memory, which holds the inputs and a
    // fraction of C.
    let capacity = bytes(&want) / 4;
    let dev = EmulatedDevice::for_variant::<V>();
    dev.set_capacity(capacity);
    let ctx = Context::on_device(dev.clone()).unwrap();
    let (c, blocks, peak) = product(&dev, &ctx, (&a, &b), Algorithm::Default, true)
        .unwrap_or_else(|e| panic!("capacity {capacity}: {e}"));
    assert!(peak <= capacity, "peak {peak} > capacity {capacity}");
    assert!(blocks >= 5, "{blocks} blocks for C 4x the device");
    // The second phase: 2 AB + 3 (AB).
    let five = reference::spgemm(&a.view(), Op::N, &b.view(), Op::N, 5.0).unwrap();
    assert_eq!(c, five);
}

#[test]
fn a_budget_below_c_gives_the_bits_of_the_whole_product_or_names_the_smallest() {
    let (a, b) = operands(&mut variant_rng::<V>(41), 300, fractional_value::<V>);
    let dev = EmulatedDevice::for_variant::<V>();
    let ctx = Context::on_device(dev.clone()).unwrap();
    let (whole, blocks, whole_peak) =
        product(&dev, &ctx, (&a, &b), Algorithm::Deterministic, false).unwrap();
    assert_eq!(blocks, 0, "a roomy device computes C whole");
    let want = reference::spgemm(&a.view(), Op::N, &b.view(), Op::N, 1.0).unwrap();
    assert_eq!(whole.row_offsets(), want.row_offsets());
    assert_eq!(whole.col_indices(), want.col_indices());
    for (x, y) in whole.values().iter().zip(want.values()) {
        assert!((x - y).abs() <= 1e-12 * y.abs().max(1.0), "{x} vs {y}");
    }
    // Besides C's device copy, the product held `rest` at its peak.
    let rest = whole_peak - bytes(&whole);
    let longest = (0..whole.nrows())
        .map(|i| whole.row_offsets()[i + 1] - whole.row_offsets()[i])
        .max()
        .unwrap() as usize;
    // The rest and C's row offsets fit, the longest row does not: refused
    // naming the smallest budget, which then works, in blocks, with the
    // bits of the whole product.
    let budget = rest + (whole.nrows() + 1) * 4 + longest * 6;
    ctx.set_memory_budget(Some(budget));
    let e = product(&dev, &ctx, (&a, &b), Algorithm::Deterministic, false)
        .expect_err("the longest row cannot fit");
    let Error::InsufficientResources(m) = &e else {
        panic!("expected INSUFFICIENT_RESOURCES, got {e:?}");
    };
    assert!(m.contains("longest row"), "{m}");
    let smallest = support::number_after(m, "smallest budget that would work is ")
        .unwrap_or_else(|| panic!("{m}")) as usize;
    assert!(smallest > budget, "{smallest} <= {budget}");
    ctx.set_memory_budget(Some(smallest));
    let (c, blocks, peak) = product(&dev, &ctx, (&a, &b), Algorithm::Deterministic, false)
        .unwrap_or_else(|e| panic!("the named budget {smallest}: {e}"));
    assert!(peak <= smallest, "peak {peak} > budget {smallest}");
    assert!(blocks >= 3, "{blocks} blocks");
    assert_eq!(c.row_offsets(), whole.row_offsets());
    assert_eq!(c.col_indices(), whole.col_indices());
    let bits = |x: &CsrMatrix<f64, i32, i32>| x.values().iter().map(|v| v.to_bits()).collect();
    let (got, expected): (Vec<u64>, Vec<u64>) = (bits(&c), bits(&whole));
    assert!(got == expected, "the blocked values differ in their bits");
}
