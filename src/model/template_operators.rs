//! minijinja's `+`, `~`, `chain`, `tojson` and `string`, made to pay fuel
//! for work minijinja does unpaid.
//!
//! minijinja 3.1 concatenates sequences lazily: `a + b` and `a|chain(b)` make
//! a view over both, and once such views nest 33 deep it copies every item
//! into one list, or flattens the views, without charging fuel for it. A
//! template that doubles a list 33 times (`{% set ns.l = ns.l + ns.l %}` in a
//! loop) has minijinja copy 2^33 items, and the process runs out of memory.
//! Operators cannot be replaced through minijinja's API, so a chat template
//! is rewritten before it is compiled: every `+` whose operands could both
//! be sequences becomes a call to [`ADD_FUNCTION`] ([`add`]), which builds
//! the concatenated list itself, paying for each item first, and leaves any
//! other `+` to minijinja; `chain` is replaced by [`chain`], which does the
//! same. Each result is a plain list (or map), so no view ever nests.
//!
//! Lists can also nest by sharing (`[x, x]` thirty times is 2^30 values to
//! write out): `tojson`, `string` and `~` (rewritten like `+` when a side
//! is not a constant, to [`CONCAT_FUNCTION`]) first walk their values
//! within the render's remaining fuel ([`walk_within_fuel`]). Comparing two
//! such nests (`==`, `in`) still takes time unpaid (no memory).

use std::collections::BTreeMap;

use minijinja::machinery::ast::{self, CallArg, Expr, Stmt};
use minijinja::value::{Rest, Value, ValueKind};
use minijinja::{Error as JinjaError, ErrorKind, State, context};

/// The name of the function a rewritten `+` calls.
pub const ADD_FUNCTION: &str = "__gantry_add";

/// The name of the function a rewritten `~` calls.
pub const CONCAT_FUNCTION: &str = "__gantry_concat";

/// Fuel for one item of a list built here: minijinja's price of a list slot
/// (32 of its 64 units to a fuel), rounded up.
const FUEL_PER_ITEM: u64 = 1;

/// `template` with every `+` that could concatenate two sequences written
/// as `__gantry_add(left, right)` and every `~` with a side that is not a
/// constant as `__gantry_concat(left, right)`; `Err` with minijinja's
/// message when the template does not parse (compiling it would say the same).
pub fn rewrite_additions(template: &str, syntax: minijinja::syntax::SyntaxConfig) -> Result<String, String> {
    let parsed = minijinja::machinery::parse(template, "chat", syntax).map_err(|e| e.to_string())?;
    let mut additions = Vec::new();
    visit_stmt(&parsed, &mut |op, left, right, span| {
        let (function, operator) = match op {
            // `+` joins sequences only when both sides could be ones.
            ast::BinOpKind::Add if could_be_sequence(left) && could_be_sequence(right) => (ADD_FUNCTION, '+'),
            // `~` writes both sides out: one that is not a constant could be a shared nest.
            ast::BinOpKind::Concat if left.as_const().is_none() || right.as_const().is_none() => (CONCAT_FUNCTION, '~'),
            _ => return,
        };
        additions.push(Addition {
            start: offset(span.start_offset),
            end: offset(span.end_offset),
            left_end: offset(left.span().end_offset),
            operator,
            function,
        });
    });
    // Outer additions first, so that each one's operands hold its inner ones.
    additions.sort_by_key(|a| (a.start, std::cmp::Reverse(a.end)));
    let mut out = String::with_capacity(template.len() + additions.len() * (ADD_FUNCTION.len() + 4));
    let mut next = 0;
    write_range(template, &additions, &mut next, 0, template.len(), &mut out)?;
    Ok(out)
}

/// One `left + right` of the template, in byte offsets: its start, its end
/// and where its left operand ends (the `+` follows, after any `)`).
#[derive(Clone, Copy)]
struct Addition {
    start: usize,
    end: usize,
    left_end: usize,
    /// `+` or `~`.
    operator: char,
    /// What it is rewritten to call.
    function: &'static str,
}

fn offset(o: u32) -> usize {
    o as usize
}

/// Writes `template[from..to]` to `out` with the additions inside it
/// rewritten; `next` is the index of the first addition not yet written
/// (they are sorted by start, outer before inner).
fn write_range(
    template: &str,
    additions: &[Addition],
    next: &mut usize,
    from: usize,
    to: usize,
    out: &mut String,
) -> Result<(), String> {
    let mut at = from;
    while let Some(&a) = additions.get(*next) {
        if a.start >= to {
            break;
        }
        *next += 1;
        let plus = operator_after(template, a.left_end, a.end, a.operator)
            .ok_or_else(|| format!("cannot find the `{}` of the expression at byte {}", a.operator, a.start))?;
        out.push_str(template.get(at..a.start).ok_or("a span inside a character")?);
        out.push_str(a.function);
        out.push('(');
        write_range(template, additions, next, a.start, plus, out)?;
        out.push(',');
        write_range(template, additions, next, plus + 1, a.end, out)?;
        out.push(')');
        at = a.end;
    }
    out.push_str(template.get(at..to).ok_or("a span inside a character")?);
    Ok(())
}

/// The byte offset of `operator` after a left operand ending at `from`:
/// only closing parentheses and whitespace come between.
fn operator_after(template: &str, from: usize, end: usize, operator: char) -> Option<usize> {
    let rest = template.get(from..end)?;
    let skipped = rest.find(|c: char| c != ')' && !c.is_whitespace())?;
    rest[skipped..].starts_with(operator).then_some(from + skipped)
}

/// Whether `expr` may evaluate to a sequence: anything but a constant that
/// is not one (a string, a number, `none`).
fn could_be_sequence(expr: &Expr<'_>) -> bool {
    match expr {
        Expr::Const(c) => matches!(c.value.kind(), ValueKind::Seq | ValueKind::Iterable),
        _ => true,
    }
}

type OnAdd<'f> = dyn FnMut(ast::BinOpKind, &Expr<'_>, &Expr<'_>, minijinja::machinery::Span) + 'f;

fn visit_stmts(stmts: &[Stmt<'_>], f: &mut OnAdd<'_>) {
    for s in stmts {
        visit_stmt(s, f);
    }
}

/// Calls `f` on every `+` of every expression of `stmt`.
fn visit_stmt(stmt: &Stmt<'_>, f: &mut OnAdd<'_>) {
    match stmt {
        Stmt::Template(t) => visit_stmts(&t.children, f),
        Stmt::EmitExpr(e) => visit_expr(&e.expr, f),
        Stmt::EmitRaw(_) | Stmt::Continue(_) | Stmt::Break(_) => {}
        Stmt::ForLoop(l) => {
            visit_expr(&l.target, f);
            visit_expr(&l.iter, f);
            if let Some(e) = &l.filter_expr {
                visit_expr(e, f);
            }
            visit_stmts(&l.body, f);
            visit_stmts(&l.else_body, f);
        }
        Stmt::IfCond(c) => {
            visit_expr(&c.expr, f);
            visit_stmts(&c.true_body, f);
            visit_stmts(&c.false_body, f);
        }
        Stmt::WithBlock(w) => {
            for (target, value) in &w.assignments {
                visit_expr(target, f);
                visit_expr(value, f);
            }
            visit_stmts(&w.body, f);
        }
        Stmt::Set(s) => {
            visit_expr(&s.target, f);
            visit_expr(&s.expr, f);
        }
        Stmt::SetBlock(s) => {
            visit_expr(&s.target, f);
            if let Some(e) = &s.filter {
                visit_expr(e, f);
            }
            visit_stmts(&s.body, f);
        }
        Stmt::AutoEscape(a) => {
            visit_expr(&a.enabled, f);
            visit_stmts(&a.body, f);
        }
        Stmt::FilterBlock(b) => {
            visit_expr(&b.filter, f);
            visit_stmts(&b.body, f);
        }
        Stmt::Block(b) => visit_stmts(&b.body, f),
        Stmt::Import(i) => {
            visit_expr(&i.expr, f);
            visit_expr(&i.name, f);
        }
        Stmt::FromImport(i) => {
            visit_expr(&i.expr, f);
            for (name, alias) in &i.names {
                visit_expr(name, f);
                if let Some(a) = alias {
                    visit_expr(a, f);
                }
            }
        }
        Stmt::Extends(e) => visit_expr(&e.name, f),
        Stmt::Include(i) => visit_expr(&i.name, f),
        Stmt::Macro(m) => visit_macro(m, f),
        Stmt::CallBlock(c) => {
            visit_call(&c.call, f);
            visit_macro(&c.macro_decl, f);
        }
        Stmt::Do(d) => visit_call(&d.call, f),
    }
}

fn visit_macro(m: &ast::Macro<'_>, f: &mut OnAdd<'_>) {
    for e in m.args.iter().chain(&m.defaults) {
        visit_expr(e, f);
    }
    visit_stmts(&m.body, f);
}

fn visit_call(c: &ast::Call<'_>, f: &mut OnAdd<'_>) {
    visit_expr(&c.expr, f);
    visit_args(&c.args, f);
}

fn visit_args(args: &[CallArg<'_>], f: &mut OnAdd<'_>) {
    for a in args {
        match a {
            CallArg::Pos(e) | CallArg::Kwarg(_, e) | CallArg::PosSplat(e) | CallArg::KwargSplat(e) => visit_expr(e, f),
        }
    }
}

fn visit_expr(expr: &Expr<'_>, f: &mut OnAdd<'_>) {
    match expr {
        Expr::Var(_) | Expr::Const(_) => {}
        Expr::Slice(s) => {
            visit_expr(&s.expr, f);
            for e in [&s.start, &s.stop, &s.step].into_iter().flatten() {
                visit_expr(e, f);
            }
        }
        Expr::UnaryOp(u) => visit_expr(&u.expr, f),
        Expr::BinOp(b) => {
            if matches!(b.op, ast::BinOpKind::Add | ast::BinOpKind::Concat) {
                f(b.op, &b.left, &b.right, b.span());
            }
            visit_expr(&b.left, f);
            visit_expr(&b.right, f);
        }
        Expr::Compare(c) => {
            visit_expr(&c.expr, f);
            for op in &c.ops {
                visit_expr(&op.expr, f);
            }
        }
        Expr::IfExpr(i) => {
            visit_expr(&i.test_expr, f);
            visit_expr(&i.true_expr, f);
            if let Some(e) = &i.false_expr {
                visit_expr(e, f);
            }
        }
        Expr::Filter(x) => {
            if let Some(e) = &x.expr {
                visit_expr(e, f);
            }
            visit_args(&x.args, f);
        }
        Expr::Test(t) => {
            visit_expr(&t.expr, f);
            visit_args(&t.args, f);
        }
        Expr::GetAttr(g) => visit_expr(&g.expr, f),
        Expr::GetItem(g) => {
            visit_expr(&g.expr, f);
            visit_expr(&g.subscript_expr, f);
        }
        Expr::Call(c) => visit_call(c, f),
        Expr::List(l) => l.items.iter().for_each(|e| visit_expr(e, f)),
        Expr::Tuple(t) => t.items.iter().for_each(|e| visit_expr(e, f)),
        Expr::Map(m) => m.keys.iter().chain(&m.values).for_each(|e| visit_expr(e, f)),
    }
}

/// Whether `v` is a list or a lazy sequence (not a tuple, whose `+` is
/// already eager and paid for, and not a string).
fn is_list(v: &Value) -> bool {
    matches!(v.kind(), ValueKind::Seq | ValueKind::Iterable) && !v.is_tuple()
}

/// Copies the items of `sources` into one list, paying [`FUEL_PER_ITEM`]
/// for each before it is copied (all at once where the lengths are known).
fn concatenate(state: &State, sources: &[Value]) -> Result<Value, JinjaError> {
    let known: Option<usize> = sources.iter().try_fold(0usize, |n, v| v.len().map(|l| n.saturating_add(l)));
    if let Some(n) = known {
        state.consume_fuel((n as u64).saturating_mul(FUEL_PER_ITEM))?;
    }
    let mut items = Vec::new();
    for source in sources {
        for item in source.try_iter()? {
            if known.is_none() {
                state.consume_fuel(FUEL_PER_ITEM)?;
            }
            items.try_reserve(1).map_err(|_| JinjaError::from(ErrorKind::OutOfFuel))?;
            items.push(item);
        }
    }
    Ok(Value::from(items))
}

/// `left + right` as minijinja computes it, except that two lists become one
/// new list, its items paid for.
pub fn add(state: &State, left: Value, right: Value) -> Result<Value, JinjaError> {
    if is_list(&left) && is_list(&right) {
        return concatenate(state, &[left, right]);
    }
    // The error leaves the expression's own location behind, so that
    // minijinja names the template's line instead.
    let unplaced = |e: JinjaError| JinjaError::new(e.kind(), e.detail().unwrap_or_default().to_owned());
    state.env().compile_expression("left + right").map_err(unplaced)?.eval(context! { left, right }).map_err(unplaced)
}

/// Checks that walking `value` the way a serializer does — every item of
/// every list and map, a shared one as often as it is shared — stays within
/// the data the render's remaining fuel pays for (64 bytes a unit: eight a
/// value, plus a string's bytes), stopping as soon as it would not. A list
/// nested in itself by sharing (`{% set ns.x = [ns.x, ns.x] %}` thirty
/// times) is small to hold but 2^30 values to write out; minijinja writes
/// it out first and charges after.
fn walk_within_fuel(state: &State, value: &Value) -> Result<(), JinjaError> {
    let Some((_, remaining)) = state.fuel_levels() else { return Ok(()) };
    let mut budget = remaining.saturating_mul(64);
    let mut pending = vec![value.clone()];
    while let Some(v) = pending.pop() {
        let cost = 8 + v.as_str().map_or(0, str::len) as u64;
        budget = budget.checked_sub(cost).ok_or_else(|| JinjaError::from(ErrorKind::OutOfFuel))?;
        match v.kind() {
            ValueKind::Map => {
                for key in v.try_iter()? {
                    pending.push(v.get_item(&key)?);
                    pending.push(key);
                }
            }
            ValueKind::Seq | ValueKind::Iterable => pending.extend(v.try_iter()?),
            _ => {}
        }
    }
    Ok(())
}

/// minijinja's `tojson`, after [`walk_within_fuel`]; the text is paid for
/// as minijinja pays (16 units a byte).
pub fn tojson(
    state: &State,
    value: &Value,
    indent: Option<Value>,
    args: minijinja::value::Kwargs,
) -> Result<Value, JinjaError> {
    walk_within_fuel(state, value)?;
    let json = minijinja::filters::tojson(value, indent, args)?;
    state.consume_fuel(json.len().unwrap_or(0) as u64 / 4)?;
    Ok(json)
}

/// `left ~ right` as minijinja computes it (both written out, one after
/// the other), after [`walk_within_fuel`] on each side; the result is paid
/// for as it is returned.
pub fn concat(state: &State, left: Value, right: Value) -> Result<Value, JinjaError> {
    walk_within_fuel(state, &left)?;
    walk_within_fuel(state, &right)?;
    let text = format!("{left}{right}");
    // Safe only if both sides are, as minijinja keeps it.
    Ok(if left.is_safe() && right.is_safe() { Value::from_safe_string(text) } else { Value::from(text) })
}

/// minijinja's `string`, after [`walk_within_fuel`].
pub fn string(state: &State, value: &Value) -> Result<Value, JinjaError> {
    walk_within_fuel(state, value)?;
    minijinja::filters::string(state, value)
}

/// minijinja's `chain` filter, made eager: sequences become one list and maps
/// one map (later maps win), each item paid for; anything else is iterated
/// into a list.
pub fn chain(state: &State, value: Value, others: Rest<Value>) -> Result<Value, JinjaError> {
    let mut all = Vec::with_capacity(others.0.len() + 1);
    all.push(value);
    all.extend(others.0);
    if !all.iter().all(|v| v.kind() == ValueKind::Map) {
        return concatenate(state, &all);
    }
    let mut merged = BTreeMap::new();
    for map in &all {
        for key in map.try_iter()? {
            state.consume_fuel(FUEL_PER_ITEM)?;
            let value = map.get_item(&key)?;
            merged.insert(key, value);
        }
    }
    Ok(Value::from(merged))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::chat_template::{ChatMessage, ChatTemplate};

    fn rewrite(template: &str) -> String {
        rewrite_additions(template, minijinja::syntax::SyntaxConfig::default()).unwrap()
    }

    fn render(template: &str) -> crate::Result<String> {
        ChatTemplate::new("test", template, "<s>", "</s>")?.render(&[ChatMessage::new("user", "hi")], true)
    }

    #[test]
    fn additions_that_could_join_sequences_are_rewritten() {
        assert_eq!(rewrite("{{ a + b }}"), "{{ __gantry_add(a , b) }}");
        // Nested and parenthesized operands keep their text.
        assert_eq!(rewrite("{{ (a + b) + (c) }}"), "{{ __gantry_add((__gantry_add(a , b)) , (c)) }}");
        assert_eq!(rewrite("{% set ns.l = ns.l + [x] %}"), "{% set ns.l = __gantry_add(ns.l , [x]) %}");
        // `~` with anything but constants on both sides writes its operands out through Gantry's.
        assert_eq!(rewrite("{{ 'a' ~ m.role ~ 'b' }}"), "{{ __gantry_concat(__gantry_concat('a' , m.role) , 'b') }}");
        assert_eq!(rewrite("{{ 'a' ~ 'b' }}"), "{{ 'a' ~ 'b' }}");
        // A string or number on either side cannot join sequences.
        assert_eq!(rewrite("{{ '<|im_start|>' + m.role + '\\n' }}"), "{{ '<|im_start|>' + m.role + '\\n' }}");
        assert_eq!(rewrite("{{ loop.index0 + 1 }}{{ 'é' }}{{ x - y }}"), "{{ loop.index0 + 1 }}{{ 'é' }}{{ x - y }}");
        // Expressions in every statement are reached.
        assert_eq!(
            rewrite("{% macro m(x=a+b) %}{% for i in a+b if a+b %}{% endfor %}{% endmacro %}"),
            "{% macro m(x=__gantry_add(a,b)) %}{% for i in __gantry_add(a,b) if __gantry_add(a,b) %}{% endfor %}{% endmacro %}"
        );
    }

    #[test]
    fn rewritten_additions_compute_what_minijinja_computes() {
        let out = render(
            "{{ [1, 2] + [3] }} {{ (([1]) + [2]) + ([3] + [4]) }} {{ 1 + 2 }} {{ 2**62 + 2**62 }} {{ 'a' + 'b' }} \
             {{ (1, 2) + (3,) }} {{ (messages + messages)|length }} {{ ([1]|chain([2], [3])) }} {{ {'a': 1, 'b': 2}|chain({'b': 3}) }} \
             {{ [1, 'x'] ~ none ~ 2 }} {{ messages[0].role ~ none }} {{ {'a': [1]}|tojson }} {{ [1]|string }}",
        )
        .unwrap();
        assert_eq!(
            out,
            "[1, 2, 3] [1, 2, 3, 4] 3 9223372036854775808 ab (1, 2, 3) 2 [1, 2, 3] {'a': 1, 'b': 3} [1, 'x']None2 userNone {\"a\": [1]} [1]"
        );
        // Maps chained onto themselves stay one map (minijinja's nested views
        // took time doubling with each level to list their keys).
        let keys = "{% set ns = namespace(m={'a': 1}) %}{% for i in range(64) %}{% set ns.m = ns.m|chain(ns.m, {i: i}) %}{% endfor %}{{ ns.m|length }}";
        assert_eq!(render(keys).unwrap(), "65");
        // An impossible addition is still an error naming the template's line.
        let error = render("\n{{ [1] + 1 }}").unwrap_err().to_string();
        assert!(error.contains("test") && error.contains("chat:2"), "{error}");
    }

    #[test]
    fn doubling_a_sequence_runs_out_of_fuel() {
        for template in [
            "{% set ns = namespace(l=[1]) %}{% for i in range(64) %}{% set ns.l = ns.l + ns.l %}{% endfor %}{{ ns.l|length }}",
            "{% set ns = namespace(l=[1]) %}{% for i in range(64) %}{% set ns.l = ns.l|chain(ns.l) %}{% endfor %}{{ ns.l|length }}",
            "{% macro m(x) %}{{ m(x + x) }}{% endmacro %}{{ m([1]) }}",
            // Nested by sharing: 2^30 values to write out.
            "{% set ns = namespace(x=[]) %}{% for i in range(30) %}{% set ns.x = [ns.x, ns.x] %}{% endfor %}{{ ns.x|tojson|length }}",
            "{% set ns = namespace(d={}) %}{% for i in range(30) %}{% set ns.d = {'a': ns.d, 'b': ns.d} %}{% endfor %}{{ ns.d|string|length }}",
            "{% set ns = namespace(x=[]) %}{% for i in range(30) %}{% set ns.x = [ns.x, ns.x] %}{% endfor %}{{ (ns.x ~ '')|length }}",
        ] {
            let error = render(template).unwrap_err().to_string();
            assert!(error.contains("ran out of fuel"), "{template}: {error}");
        }
    }
}
