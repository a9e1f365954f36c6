//! [`TestValue`]: what the tests need of a value type beyond
//! [`Scalar`](rusparse::Scalar).

use rusparse::{Complex, Scalar};

/// The value types of the tests (`f32`, `f64`, `Complex<f32>`,
/// `Complex<f64>`), built from and seen as a pair of `f64` parts. The
/// conversions are exact for values the type holds, so integer-valued test
/// data sums exactly in every type.
pub trait TestValue: Scalar {
    /// Machine epsilon of the component type.
    const EPS: f64;
    /// `re + i·im` (`re` for real types: the imaginary part is dropped).
    fn from_parts(re: f64, im: f64) -> Self;
    /// `(re, im)` (`im = 0` for real types).
    fn parts(self) -> (f64, f64);
    /// The bit patterns of the components (`im` 0 for real types).
    fn bits(self) -> (u64, u64);
    /// The value as a `Complex<f64>` (exact).
    fn to_c64(self) -> Complex<f64> {
        let (re, im) = self.parts();
        Complex::new(re, im)
    }
}

impl TestValue for f32 {
    const EPS: f64 = f32::EPSILON as f64;
    fn from_parts(re: f64, _im: f64) -> Self {
        re as f32
    }
    fn parts(self) -> (f64, f64) {
        (self as f64, 0.0)
    }
    fn bits(self) -> (u64, u64) {
        (self.to_bits() as u64, 0)
    }
}

impl TestValue for f64 {
    const EPS: f64 = f64::EPSILON;
    fn from_parts(re: f64, _im: f64) -> Self {
        re
    }
    fn parts(self) -> (f64, f64) {
        (self, 0.0)
    }
    fn bits(self) -> (u64, u64) {
        (self.to_bits(), 0)
    }
}

impl TestValue for Complex<f32> {
    const EPS: f64 = f32::EPSILON as f64;
    fn from_parts(re: f64, im: f64) -> Self {
        Complex::new(re as f32, im as f32)
    }
    fn parts(self) -> (f64, f64) {
        (self.re as f64, self.im as f64)
    }
    fn bits(self) -> (u64, u64) {
        (self.re.to_bits() as u64, self.im.to_bits() as u64)
    }
}

impl TestValue for Complex<f64> {
    const EPS: f64 = f64::EPSILON;
    fn from_parts(re: f64, im: f64) -> Self {
        Complex::new(re, im)
    }
    fn parts(self) -> (f64, f64) {
        (self.re, self.im)
    }
    fn bits(self) -> (u64, u64) {
        (self.re.to_bits(), self.im.to_bits())
    }
}
