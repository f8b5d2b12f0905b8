//! Property tests: random valid graphs always build; random invalid ops always fail.

use gantry_arenas::GraphArena;
use gantry_engine::{Context, DType, TensorId, UnaryOp};
use proptest::prelude::*;

/// One valid step applied to the current tensor.
#[derive(Debug, Clone)]
enum Step {
    Unary(usize),
    BinaryBroadcast([bool; 4], usize),
    MulMat(usize),
    SumRows,
    Flatten,
    Permute([usize; 4]),
    TransposeCont,
    SoftMax,
    RmsNorm,
    ConcatSelf(usize),
    Repeat([usize; 4]),
    Scale(i8),
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        (0..UnaryOp::ALL.len()).prop_map(Step::Unary),
        (any::<[bool; 4]>(), 0..4usize).prop_map(|(m, o)| Step::BinaryBroadcast(m, o)),
        (1..6usize).prop_map(Step::MulMat),
        Just(Step::SumRows),
        Just(Step::Flatten),
        Just([0, 1, 2, 3]).prop_shuffle().prop_map(Step::Permute),
        Just(Step::TransposeCont),
        Just(Step::SoftMax),
        Just(Step::RmsNorm),
        (0..4usize).prop_map(Step::ConcatSelf),
        prop::array::uniform4(1..3usize).prop_map(Step::Repeat),
        any::<i8>().prop_map(Step::Scale),
    ]
}

fn apply(ctx: &mut Context, x: TensorId, s: &Step) -> gantry_engine::Result<TensorId> {
    let ne = ctx.desc(x)?.ne;
    match *s {
        Step::Unary(i) => ctx.unary(UnaryOp::ALL[i], x),
        Step::BinaryBroadcast(mask, op) => {
            let shape: Vec<usize> = (0..4).map(|i| if mask[i] { 1 } else { ne[i] }).collect();
            let b = ctx.tensor(DType::F32, shape)?;
            ctx.binary(gantry_engine::BinaryOp::ALL[op], x, b)
        }
        Step::MulMat(m) => {
            let w = ctx.tensor(DType::F32, [ne[0], m])?;
            ctx.mul_mat(w, x)
        }
        Step::SumRows => ctx.sum_rows(x),
        Step::Flatten => {
            let c = ctx.cont(x)?;
            ctx.reshape(c, [ne.iter().product::<usize>()])
        }
        Step::Permute(axes) => ctx.permute(x, axes),
        Step::TransposeCont => {
            let t = ctx.transpose(x)?;
            ctx.cont(t)
        }
        Step::SoftMax => {
            let c = ctx.cont(x)?;
            ctx.soft_max_ext(c, None, 0.5, 0.0)
        }
        Step::RmsNorm => ctx.rms_norm(x, 1e-6),
        Step::ConcatSelf(dim) => ctx.concat(x, x, dim),
        Step::Repeat(k) => ctx.repeat_to(x, [ne[0] * k[0], ne[1] * k[1], ne[2] * k[2], ne[3] * k[3]]),
        Step::Scale(s) => ctx.scale(x, s as f32, 1.0),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn valid_programs_build(shape in prop::array::uniform4(1..4usize), steps in prop::collection::vec(step(), 1..24)) {
        let mut ctx = Context::new();
        let x0 = ctx.tensor(DType::F32, shape).unwrap();
        let mut x = x0;
        let mut made = vec![];
        for s in &steps {
            // Keep tensors small: concat and repeat grow them.
            if ctx.desc(x).unwrap().nelements() > 4096 {
                break;
            }
            x = apply(&mut ctx, x, s).map_err(|e| TestCaseError::fail(format!("{s:?}: {e}")))?;
            made.push(x);
        }
        let arena = GraphArena::new();
        let g = ctx.build_graph(&arena, &[x]).unwrap();
        prop_assert!(g.leafs().contains(&x0) || g.nodes().is_empty());
        prop_assert_eq!(g.nodes().last().copied().unwrap_or(x0), x);
        for t in made {
            prop_assert!(g.nodes().contains(&t), "every step's result feeds the output");
        }
    }

    #[test]
    fn invalid_ops_fail(shape in prop::array::uniform4(1..5usize), which in 0..7usize, dim in 0..4usize) {
        let mut ctx = Context::new();
        let x = ctx.tensor(DType::F32, shape).unwrap();
        let mut bad = shape;
        bad[dim] += 1; // n + 1 never divides n
        let r = match which {
            0 => { let b = ctx.tensor(DType::F32, bad).unwrap(); ctx.add(x, b) }
            1 => { let w = ctx.tensor(DType::F32, [shape[0] + 1, 3]).unwrap(); ctx.mul_mat(w, x) }
            2 => ctx.reshape(x, [shape.iter().product::<usize>() + 1]),
            3 => {
                let other = (dim + 1) % 4;
                let mut s = shape;
                s[other] += 1;
                let b = ctx.tensor(DType::F32, s).unwrap();
                ctx.concat(x, b, dim)
            }
            4 => ctx.permute(x, [dim, dim, (dim + 1) % 4, (dim + 2) % 4]),
            5 => ctx.view_1d(x, shape.iter().product::<usize>(), 4),
            _ => { let b = ctx.tensor(DType::F32, bad).unwrap(); ctx.repeat(b, x) }
        };
        prop_assert!(r.is_err(), "case {} on {:?} was accepted", which, shape);
    }
}
