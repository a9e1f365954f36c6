//! The memory budget on a GPU (emulated H100): a product's device memory
//! (staged A, B and C, row metadata, spill lists, global hash tables) stays
//! within the context's budget at every allocation, the global tables'
//! batches shrink to fit it, a budget too small is refused naming the
//! smallest that works, and on a device with little memory and no budget
//! the batches shrink to its free memory. Each C is compared exactly with
//! `rusparse::reference` (integer values).

use rusparse::{reference, Algorithm, Context, CsrMatrix, Error, Op, SpgemmOptions};
use rusparse_kernel_host_tests::device::EmulatedDevice;
use rusparse_kernel_host_tests::hash::HostCsr;
use rusparse_kernel_host_tests::support::{self, random_rows, CANONICAL};
use rusparse_kernel_host_tests::{small_int_value, variant_rng, Rng, F64I32I32W32};

type V = F64I32I32W32;

/// A (256 x 600) with 2 rows of about 130 entries among rows of 2, and B
/// (600 x 60000) with 100 entries a row: the long rows of C hold about
/// 11,000 entries each, beyond the H100's largest shared-memory bin, so
/// the numeric phase runs them with global hash tables (384 KiB each).
fn operands(rng: &mut Rng) -> (HostCsr<V>, HostCsr<V>) {
    let a_len = |_: &mut Rng, i: usize| if i.is_multiple_of(128) { 150 } else { 2 };
    let a = random_rows(rng, 256, 600, CANONICAL, a_len, small_int_value::<V>);
    let b = random_rows(
        rng,
        600,
        60_000,
        CANONICAL,
        |_, _| 100,
        small_int_value::<V>,
    );
    (
        HostCsr::from_rows(600, &a, 0),
        HostCsr::from_rows(60_000, &b, 0),
    )
}

fn options() -> SpgemmOptions<f64> {
    SpgemmOptions {
        op_a: Op::N,
        op_b: Op::N,
        alpha: 1.0,
        algorithm: Algorithm::Default,
        column_order: Default::default(),
    }
}

/// The product on `ctx`, and the device's peak beyond what it held before.
fn product(
    dev: &EmulatedDevice,
    ctx: &Context,
    (a, b): (&HostCsr<V>, &HostCsr<V>),
) -> (Result<CsrMatrix<f64, i32, i32>, Error>, usize) {
    let before = dev.live_bytes();
    dev.reset_peak();
    let c = ctx.spgemm(&a.view(), &b.view(), &options());
    assert!(dev.live_allocations().is_empty(), "device memory left");
    (c, dev.peak_bytes() - before)
}

/// The number of bytes that follows `after` in `e`'s message.
fn bytes_after(e: &Error, after: &str) -> Option<usize> {
    let Error::InsufficientResources(m) = e else {
        panic!("expected INSUFFICIENT_RESOURCES, got {e:?}");
    };
    support::number_after(m, after).map(|n| n as usize)
}

#[test]
fn a_gpu_product_keeps_to_its_budget_or_names_the_smallest() {
    let dev = EmulatedDevice::for_variant::<V>();
    let ctx = Context::on_device(dev.clone()).unwrap();
    let (a, b) = operands(&mut variant_rng::<V>(30));
    let want = reference::spgemm(&a.view(), Op::N, &b.view(), Op::N, 1.0).unwrap();
    let (c, free_peak) = product(&dev, &ctx, (&a, &b));
    assert_eq!(c.unwrap(), want, "no budget");
    let c_bytes = 257 * 4 + want.nnz() * 12;
    let staged = [&a, &b].map(|x| (x.view().nrows() + 1) * 4 + x.view().nnz() * 12);
    assert!(
        free_peak > c_bytes + staged[0] + staged[1] + (700 << 10),
        "peak {free_peak}: expected A, B and C ({c_bytes}) on the device and two \
         global tables of 384 KiB"
    );
    // The unbudgeted peak fits; less shrinks the global tables' batches.
    for budget in [free_peak, free_peak - (200 << 10), free_peak - (380 << 10)] {
        ctx.set_memory_budget(Some(budget));
        let (c, peak) = product(&dev, &ctx, (&a, &b));
        let c = c.unwrap_or_else(|e| panic!("budget {budget}: {e}"));
        assert_eq!(c, want, "budget {budget}");
        assert!(peak <= budget, "budget {budget}: peak {peak}");
    }
    // Too small to plan.
    ctx.set_memory_budget(Some(4096));
    let (e, peak) = product(&dev, &ctx, (&a, &b));
    let e = e.expect_err("4 KiB accepted");
    assert!(peak <= 4096, "{peak} bytes allocated refusing");
    assert!(
        bytes_after(&e, "alone takes ").is_some() || bytes_after(&e, "alone needs ").is_some(),
        "{e}"
    );
    // A quarter above C: refused naming the smallest that works (work
    // estimation cannot know nnz(C), so the copy phase may name a larger
    // one once it does); the named budget then works.
    let mut budget = c_bytes + c_bytes / 4;
    let mut refusals = 0;
    loop {
        ctx.set_memory_budget(Some(budget));
        let (c, peak) = product(&dev, &ctx, (&a, &b));
        assert!(peak <= budget, "budget {budget}: peak {peak}");
        match c {
            Ok(c) => {
                assert_eq!(c, want, "budget {budget}");
                break;
            }
            Err(e) => {
                // Work estimation's own need (its staged inputs, metadata)
                // is a lower bound; the phases' refusals name the smallest.
                let smallest = bytes_after(&e, "smallest budget that would work is ")
                    .or_else(|| bytes_after(&e, "alone takes "))
                    .unwrap_or_else(|| panic!("budget {budget}: {e}"));
                assert!(smallest > budget, "{smallest} <= {budget}");
                budget = smallest;
                refusals += 1;
                assert!(refusals <= 4, "still refused at {budget}: {e}");
            }
        }
    }
    assert!(refusals >= 1, "{} bytes were enough", c_bytes + c_bytes / 4);
    assert!(
        budget < free_peak,
        "the smallest budget {budget} is the unbudgeted peak"
    );
    ctx.set_memory_budget(None);
}

#[test]
fn a_small_device_without_a_budget_batches_its_tables_into_its_free_memory() {
    let (a, b) = operands(&mut variant_rng::<V>(31));
    let want = reference::spgemm(&a.view(), Op::N, &b.view(), Op::N, 1.0).unwrap();
    let roomy = EmulatedDevice::for_variant::<V>();
    let (c, free_peak) = product(
        &roomy,
        &Context::on_device(roomy.clone()).unwrap(),
        (&a, &b),
    );
    assert_eq!(c.unwrap(), want);
    // 380 KiB less than the product took on a large device: the two
    // global tables (in one batch there) go one at a time.
    let small = EmulatedDevice::for_variant::<V>();
    let capacity = free_peak - (380 << 10);
    small.set_capacity(capacity);
    let ctx = Context::on_device(small.clone()).unwrap();
    let (c, peak) = product(&small, &ctx, (&a, &b));
    assert_eq!(c.expect("batched into the free memory"), want);
    assert!(peak <= capacity, "peak {peak}");
    // Far too small: refused naming the smallest memory that works, which
    // then works.
    let tiny = EmulatedDevice::for_variant::<V>();
    tiny.set_capacity(free_peak / 2);
    let mut capacity = free_peak / 2;
    for _ in 0..4 {
        let ctx = Context::on_device(tiny.clone()).unwrap();
        let (c, peak) = product(&tiny, &ctx, (&a, &b));
        assert!(peak <= capacity);
        match c {
            Ok(c) => {
                assert_eq!(c, want);
                return;
            }
            Err(e) => {
                assert!(
                    matches!(&e, Error::InsufficientResources(m) if m.contains("free memory")),
                    "{e}"
                );
                let smallest = bytes_after(&e, "smallest budget that would work is ")
                    .or_else(|| bytes_after(&e, "alone takes "))
                    .unwrap_or_else(|| panic!("{e}"));
                assert!(smallest > capacity, "{smallest} <= {capacity}");
                capacity = smallest;
                tiny.set_capacity(capacity);
            }
        }
    }
    panic!("still refused with {capacity} bytes");
}
