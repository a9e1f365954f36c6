use rusparse::*;

#[test]
fn small_products_match_reference() {
    let a = CsrMatrix::<f64, i32>::from_triplets(
        3,
        4,
        &[
            (0, 0, 1.0),
            (0, 3, 2.0),
            (0, 0, 5.0),
            (2, 1, 3.0),
            (2, 2, -1.0),
        ],
        IndexBase::One,
    )
    .unwrap();
    let b = CsrMatrix::<f64, i32>::from_triplets(
        4,
        2,
        &[
            (0, 1, 1.0),
            (3, 0, 2.0),
            (1, 0, 4.0),
            (1, 1, 1.0),
            (2, 1, 7.0),
        ],
        IndexBase::One,
    )
    .unwrap();
    for (oa, ob, bb) in [(Op::N, Op::N, &b), (Op::C, Op::N, &a)] {
        let opts = SpgemmOptions {
            op_a: oa,
            op_b: ob,
            alpha: 2.0,
            ..Default::default()
        };
        let c = spgemm(&a.view(), &bb.view(), &opts).unwrap();
        let r = reference::spgemm(&a.view(), oa, &bb.view(), ob, 2.0).unwrap();
        assert_eq!(c, r);
    }
}
