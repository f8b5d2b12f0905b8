//! minijinja's `+`, `~`, `chain`, `tojson`, `string` and deep reads of
//! values, made to pay fuel for work minijinja does unpaid.
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
//! write out or compare). minijinja pays for what it creates, not for what
//! it reads, so every value it would compare, hash or write out deeply (the
//! operands of `==`, `<`, `in`, …, the subjects of filters such as `join`,
//! `lower` or `sort`, the arguments of filters, tests and methods, what
//! `{{ }}` writes) is first passed through [`WALK_FUNCTION`] ([`walk`]),
//! which walks it within the render's remaining fuel and pays for the walk;
//! `tojson`, `string` and `~` (rewritten like `+` when a side is not a
//! constant, to [`CONCAT_FUNCTION`]) walk their values themselves
//! ([`walk_within_fuel`]).
//!
//! Values can also nest deeply without being large: a loop that sets
//! `ns.x = {'a': ns.x}` (or a new namespace's attribute to the last one)
//! builds a chain a million deep within a long chat's fuel, and minijinja
//! writes it out, and Rust drops it, by recursing once a level: a stack
//! overflow, which aborts the process. So no value may nest deeper than
//! [`MAX_VALUE_DEPTH`]: every walk stops there with an error, and what can
//! make a value deeper — the items of list, tuple and map literals, the
//! value given to a namespace's attribute (`{% set ns.x = … %}`), the
//! subjects of `batch` and `slice` — is passed through [`NEST_FUNCTION`]
//! ([`nest`]) first, which checks its depth for a fuel unit per eight
//! values.

use std::collections::BTreeMap;

use minijinja::machinery::ast::{self, CallArg, Expr, Stmt};
use minijinja::value::{Rest, Value, ValueKind};
use minijinja::{Error as JinjaError, ErrorKind, State, context};

/// The name of the function a rewritten `+` calls.
pub const ADD_FUNCTION: &str = "__gantry_add";

/// The name of the function a rewritten `~` calls.
pub const CONCAT_FUNCTION: &str = "__gantry_concat";

/// The name of the function that walks a value before minijinja compares,
/// hashes or writes it out.
pub const WALK_FUNCTION: &str = "__gantry_walk";

/// The name of the function that checks a value's depth before it is
/// nested in another.
pub const NEST_FUNCTION: &str = "__gantry_nest";

/// The deepest a template's value may nest (a list in a map in a list …).
/// Chat templates nest a message's fields a few levels; a tool's JSON schema
/// a few dozen. Writing out or dropping a value recurses once a level, so
/// 256 levels stay far inside the smallest render thread's stack.
pub const MAX_VALUE_DEPTH: u64 = 256;

/// Fuel for one item of a list built here: minijinja's price of a list slot
/// (32 of its 64 units to a fuel), rounded up.
const FUEL_PER_ITEM: u64 = 1;

/// Filters whose subject minijinja uses only shallowly (its length, its
/// items as they are, a conversion of a number) or that walk it themselves
/// ([`tojson`], [`string`], [`chain`]): their subject is not walked first.
const SHALLOW_FILTERS: &[&str] = &[
    "abs", "attr", "bool", "chain", "count", "d", "default", "first", "float", "int", "items", "last", "length",
    "list", "reverse", "round", "string", "tojson",
];

/// Tests that look at their subject's kind or identity only.
const SHALLOW_TESTS: &[&str] = &[
    "boolean",
    "callable",
    "defined",
    "divisibleby",
    "escaped",
    "even",
    "false",
    "filter",
    "float",
    "integer",
    "iterable",
    "mapping",
    "none",
    "number",
    "odd",
    "safe",
    "sameas",
    "sequence",
    "string",
    "test",
    "true",
    "undefined",
];

/// Functions whose arguments are walked: the environment's own (a call of
/// anything else calls a macro, `caller` or a recursive `loop`, which only
/// pass their arguments on) and every method (`loop.changed`, `get`, …).
const GLOBAL_FUNCTIONS: &[&str] = &["dict", "namespace", "raise_exception", "range", "strftime_now"];

/// `template` rewritten so that minijinja does no unpaid work on it: every
/// `+` whose operands could both be sequences calls [`ADD_FUNCTION`], every
/// `~` with a side that is not a constant calls [`CONCAT_FUNCTION`], and
/// every value that minijinja would compare, hash or write out deeply goes
/// through [`WALK_FUNCTION`] first: the operands of comparisons, the
/// subjects of filters and tests but the shallow ones, the arguments of
/// filters, tests, methods and the environment's functions, subscripts,
/// the keys of map literals and what `{{ }}` writes. Constants are left
/// alone. `Err` with minijinja's message when the template does not parse
/// (compiling it would say the same).
pub fn rewrite_template(template: &str, syntax: minijinja::syntax::SyntaxConfig) -> Result<String, String> {
    check_nesting(template, syntax.clone())?;
    let parsed = minijinja::machinery::parse(template, "chat", syntax).map_err(|e| e.to_string())?;
    let mut rewriter = Rewriter { template, edits: Vec::new(), error: None };
    visit_stmt(&parsed, &mut rewriter);
    if let Some(error) = rewriter.error {
        return Err(error);
    }
    let mut edits = rewriter.edits;
    // Outer edits first, so that each one's text holds its inner ones; of
    // two with one span, the walk outside the operator.
    edits.sort_by_key(|e| (e.start, std::cmp::Reverse(e.end), e.operator.is_some()));
    let mut out = String::with_capacity(template.len() + edits.len() * (WALK_FUNCTION.len() + 4));
    let mut next = 0;
    write_range(template, &edits, &mut next, 0, template.len(), &mut out)?;
    Ok(out)
}

/// The deepest a template may nest: operators in one tag (`{{ }}` or
/// `{% %}`) plus the blocks open around it, each `elif` counting as one
/// more level of its `if`.
///
/// minijinja builds `x.a.a.a…`, `1 + 1 + …`, `x or x or …`, `x|f|f…` and
/// a chain of `elif`s as nested nodes without recursing (its guard counts
/// parentheses and blocks), then its compiler, this module's visitor and
/// the tree's drop recurse once per node: 10,000 of them, or 2,000 `elif`s,
/// overflowed a 2 MiB thread's stack (`gantry serve` loads on one), an
/// abort no error can report; a chain of unary `-` recursed in the parser
/// itself. Each operator and block adds at most one level, so this bound
/// bounds the tree's depth. Real templates' deepest tags hold a few dozen.
pub const MAX_TEMPLATE_NESTING: usize = 1000;

/// Blocks that nest their body (an `if`'s `elif`s nest further).
const NESTING_BLOCKS: &[&str] = &["if", "for", "macro", "call", "filter", "with", "autoescape", "block"];

/// `Err` naming the line where the template first nests deeper than
/// [`MAX_TEMPLATE_NESTING`] (operators: tokens that nest an expression, as
/// operators, brackets, `.`, `|`, `and`, `or`, `not`, `is`, `if`, `in`).
fn check_nesting(template: &str, syntax: minijinja::syntax::SyntaxConfig) -> Result<(), String> {
    use minijinja::machinery::Token;
    // Each open block: its keyword and the levels it adds (an `if` one more
    // per `elif`). An `end…` closes only a block of its own keyword.
    let mut blocks: Vec<(&str, usize)> = Vec::new();
    let mut open_levels = 0usize;
    let mut in_tag = 0usize;
    // The first word of a `{% %}` tag names its statement.
    let mut statement_next = false;
    // A `{% set x %}` without `=` opens a block (up to `{% endset %}`).
    let mut set_block = false;
    for token in minijinja::machinery::tokenize(template, false, syntax) {
        // A token the lexer refuses is left to the parser, whose message names it.
        let Ok((token, span)) = token else { return Ok(()) };
        if std::mem::take(&mut statement_next)
            && let Token::Ident(word) = token
        {
            if NESTING_BLOCKS.contains(&word) {
                blocks.push((word, 1));
                open_levels += 1;
            } else if word == "set" {
                set_block = true;
            } else if word == "elif" {
                if let Some((_, levels)) = blocks.last_mut().filter(|(kind, _)| *kind == "if") {
                    *levels += 1;
                    open_levels += 1;
                }
            } else if let Some(kind) = word.strip_prefix("end")
                && blocks.last().is_some_and(|(open, _)| *open == kind)
            {
                open_levels -= blocks.pop().map_or(0, |(_, levels)| levels);
            }
        }
        let nests = match token {
            Token::BlockStart => {
                statement_next = true;
                in_tag = 0;
                false
            }
            Token::Assign => {
                set_block = false;
                false
            }
            Token::BlockEnd => {
                if std::mem::take(&mut set_block) {
                    blocks.push(("set", 1));
                    open_levels += 1;
                }
                in_tag = 0;
                false
            }
            Token::VariableStart | Token::VariableEnd => {
                in_tag = 0;
                false
            }
            Token::Ident(word) => matches!(word, "and" | "or" | "not" | "is" | "if" | "in"),
            Token::Plus
            | Token::Minus
            | Token::Mul
            | Token::Div
            | Token::FloorDiv
            | Token::Pow
            | Token::Mod
            | Token::Dot
            | Token::Tilde
            | Token::Pipe
            | Token::Eq
            | Token::Ne
            | Token::Gt
            | Token::Gte
            | Token::Lt
            | Token::Lte
            | Token::BracketOpen
            | Token::ParenOpen
            | Token::BraceOpen => true,
            _ => false,
        };
        in_tag += usize::from(nests);
        if in_tag + open_levels > MAX_TEMPLATE_NESTING {
            return Err(format!(
                "it nests more than {MAX_TEMPLATE_NESTING} deep at line {} (operators of one expression, \
                 blocks and elifs around it: too deep to compile)",
                span.start_line
            ));
        }
    }
    Ok(())
}

/// One rewrite of the template, in byte offsets: an expression that becomes
/// a call of `function`, either with the expression as its argument or,
/// for a binary `operator`, with its two operands.
#[derive(Clone, Copy)]
struct Edit {
    start: usize,
    end: usize,
    /// For `left + right` or `left ~ right`: the operator and where the
    /// left operand ends (the operator follows, after any `)`).
    operator: Option<(char, usize)>,
    /// What it is rewritten to call.
    function: &'static str,
}

/// The edits of a template, collected from its syntax tree; the first
/// expression whose text could not be found ends the rewrite.
struct Rewriter<'t> {
    template: &'t str,
    edits: Vec<Edit>,
    error: Option<String>,
}

impl Rewriter<'_> {
    /// Adds an edit of `expr`'s text.
    fn push(&mut self, expr: &Expr<'_>, operator: Option<(char, usize)>, function: &'static str) {
        match extent(self.template, expr) {
            Some((start, end)) => self.edits.push(Edit { start, end, operator, function }),
            None => {
                let at = expr.span();
                self.error.get_or_insert_with(|| {
                    format!("cannot find the text of the expression at line {}, column {}", at.start_line, at.start_col)
                });
            }
        }
    }
}

/// Where `expr`'s text begins in the template: minijinja's spans end where
/// each expression ends, but the spans of filters and tests begin at their
/// name and those of comparisons at the token before them, so the start is
/// that of the expression's leftmost part (the subject of a filter, the left
/// operand of an operator) instead.
fn first_start(template: &str, expr: &Expr<'_>) -> usize {
    let own = offset(expr.span().start_offset);
    match expr {
        Expr::Var(_) | Expr::Const(_) | Expr::List(_) | Expr::Tuple(_) | Expr::Map(_) => own,
        Expr::Filter(f) => f.expr.as_ref().map_or(own, |e| first_start(template, e)),
        Expr::Test(t) => first_start(template, &t.expr),
        Expr::BinOp(b) => first_start(template, &b.left),
        Expr::Compare(c) => first_start(template, &c.expr),
        Expr::IfExpr(i) => first_start(template, &i.true_expr),
        Expr::GetAttr(g) => first_start(template, &g.expr),
        Expr::GetItem(g) => first_start(template, &g.expr),
        Expr::Slice(s) => first_start(template, &s.expr),
        Expr::Call(c) => first_start(template, &c.expr),
        // `-x` and `not x` begin at their operator; the negations minijinja
        // makes of `not in` and `is not` begin elsewhere (a wrong `not` kept
        // in front is harmless: the walk leaves the value as it is).
        Expr::UnaryOp(u) => {
            let operand = first_start(template, &u.expr);
            let at_operator = template.get(own..).is_some_and(|t| t.starts_with('-') || t.starts_with("not"));
            if at_operator && own < operand { own } else { operand }
        }
    }
}

/// The byte range of `expr`'s text: from [`first_start`], widened over the
/// opening brackets its text closes (`(a + b)|f` starts at the `(`), to
/// its span's end; `None` if the text is not a balanced expression there.
fn extent(template: &str, expr: &Expr<'_>) -> Option<(usize, usize)> {
    let end = offset(expr.span().end_offset);
    let mut start = first_start(template, expr);
    let mut unopened = unopened_closers(template.get(start..end)?)?;
    while unopened > 0 {
        let before = template.get(..start)?.trim_end();
        let opener = before.chars().next_back().filter(|c| matches!(c, '(' | '[' | '{'))?;
        start = before.len() - opener.len_utf8();
        unopened -= 1;
    }
    Some((start, end))
}

/// How many brackets `text` closes that it did not open, outside its
/// string literals; `None` if it leaves one open.
fn unopened_closers(text: &str) -> Option<usize> {
    let (mut depth, mut lowest) = (0i64, 0i64);
    let mut quote = None;
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        match (quote, c) {
            (Some(_), '\\') => {
                chars.next();
            }
            (Some(q), c) if c == q => quote = None,
            (Some(_), _) => {}
            (None, '\'' | '"') => quote = Some(c),
            (None, '(' | '[' | '{') => depth += 1,
            (None, ')' | ']' | '}') => {
                depth -= 1;
                lowest = lowest.min(depth);
            }
            _ => {}
        }
    }
    // Every opener after the lowest point must close again by the end.
    (depth == lowest).then_some(usize::try_from(-lowest).ok()?)
}

fn offset(o: u32) -> usize {
    o as usize
}

/// Writes `template[from..to]` to `out` with the edits inside it applied;
/// `next` is the index of the first edit not yet written (they are sorted
/// by start, outer before inner).
fn write_range(
    template: &str,
    edits: &[Edit],
    next: &mut usize,
    from: usize,
    to: usize,
    out: &mut String,
) -> Result<(), String> {
    let mut at = from;
    while let Some(&e) = edits.get(*next) {
        if e.start >= to {
            break;
        }
        if e.end > to {
            return Err(format!("expressions overlap at byte {}", e.start));
        }
        *next += 1;
        out.push_str(template.get(at..e.start).ok_or("a span inside a character")?);
        out.push_str(e.function);
        out.push('(');
        match e.operator {
            Some((operator, left_end)) => {
                let at_operator = operator_after(template, left_end, e.end, operator)
                    .ok_or_else(|| format!("cannot find the `{operator}` of the expression at byte {}", e.start))?;
                write_range(template, edits, next, e.start, at_operator, out)?;
                out.push(',');
                write_range(template, edits, next, at_operator + 1, e.end, out)?;
            }
            None => write_range(template, edits, next, e.start, e.end, out)?,
        }
        out.push(')');
        at = e.end;
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

/// Adds a walk of `expr` unless it is a constant (whose size the template's
/// text already shows).
fn walk_edit(expr: &Expr<'_>, r: &mut Rewriter<'_>) {
    if expr.as_const().is_none() {
        r.push(expr, None, WALK_FUNCTION);
    }
}

/// Adds a depth check of `expr`, about to be nested in another value,
/// unless it is a constant.
fn nest_edit(expr: &Expr<'_>, r: &mut Rewriter<'_>) {
    if expr.as_const().is_none() {
        r.push(expr, None, NEST_FUNCTION);
    }
}

fn visit_stmts(stmts: &[Stmt<'_>], r: &mut Rewriter<'_>) {
    for s in stmts {
        visit_stmt(s, r);
    }
}

/// Adds the edits of every expression of `stmt`.
fn visit_stmt(stmt: &Stmt<'_>, r: &mut Rewriter<'_>) {
    match stmt {
        Stmt::Template(t) => visit_stmts(&t.children, r),
        Stmt::EmitExpr(e) => {
            walk_edit(&e.expr, r);
            visit_expr(&e.expr, r);
        }
        Stmt::EmitRaw(_) | Stmt::Continue(_) | Stmt::Break(_) => {}
        Stmt::ForLoop(l) => {
            visit_target(&l.target, r);
            visit_expr(&l.iter, r);
            if let Some(e) = &l.filter_expr {
                visit_expr(e, r);
            }
            visit_stmts(&l.body, r);
            visit_stmts(&l.else_body, r);
        }
        Stmt::IfCond(c) => {
            visit_expr(&c.expr, r);
            visit_stmts(&c.true_body, r);
            visit_stmts(&c.false_body, r);
        }
        Stmt::WithBlock(w) => {
            for (target, value) in &w.assignments {
                visit_target(target, r);
                visit_expr(value, r);
            }
            visit_stmts(&w.body, r);
        }
        Stmt::Set(s) => {
            visit_target(&s.target, r);
            // A namespace's attribute nests the value one level deeper.
            if matches!(s.target, Expr::GetAttr(_)) {
                nest_edit(&s.expr, r);
            }
            visit_expr(&s.expr, r);
        }
        Stmt::SetBlock(s) => {
            visit_target(&s.target, r);
            if let Some(e) = &s.filter {
                visit_expr(e, r);
            }
            visit_stmts(&s.body, r);
        }
        Stmt::AutoEscape(a) => {
            visit_expr(&a.enabled, r);
            visit_stmts(&a.body, r);
        }
        Stmt::FilterBlock(b) => {
            visit_expr(&b.filter, r);
            visit_stmts(&b.body, r);
        }
        Stmt::Block(b) => visit_stmts(&b.body, r),
        Stmt::Import(i) => {
            visit_expr(&i.expr, r);
            visit_expr(&i.name, r);
        }
        Stmt::FromImport(i) => {
            visit_expr(&i.expr, r);
            for (name, alias) in &i.names {
                visit_expr(name, r);
                if let Some(a) = alias {
                    visit_expr(a, r);
                }
            }
        }
        Stmt::Extends(e) => visit_expr(&e.name, r),
        Stmt::Include(i) => visit_expr(&i.name, r),
        Stmt::Macro(m) => visit_macro(m, r),
        Stmt::CallBlock(c) => {
            visit_call(&c.call, r);
            visit_macro(&c.macro_decl, r);
        }
        Stmt::Do(d) => visit_call(&d.call, r),
    }
}

/// The edits of an assignment's target (`a`, `a, b`, `ns.x`): the names a
/// tuple or list of them binds are no values, so none of them is checked
/// (`for __gantry_nest(a), b in …` does not parse).
fn visit_target(expr: &Expr<'_>, r: &mut Rewriter<'_>) {
    match expr {
        Expr::Tuple(t) => t.items.iter().for_each(|e| visit_target(e, r)),
        Expr::List(l) => l.items.iter().for_each(|e| visit_target(e, r)),
        e => visit_expr(e, r),
    }
}

/// The edits of a literal's items: each is depth-checked, then visited.
fn visit_items(items: &[Expr<'_>], r: &mut Rewriter<'_>) {
    for e in items {
        nest_edit(e, r);
        visit_expr(e, r);
    }
}

fn visit_macro(m: &ast::Macro<'_>, r: &mut Rewriter<'_>) {
    for e in m.args.iter().chain(&m.defaults) {
        visit_expr(e, r);
    }
    visit_stmts(&m.body, r);
}

/// A call's edits: its arguments are walked when it calls a method or one of
/// [`GLOBAL_FUNCTIONS`].
fn visit_call(c: &ast::Call<'_>, r: &mut Rewriter<'_>) {
    visit_expr(&c.expr, r);
    let walked = match &c.expr {
        Expr::Var(v) => GLOBAL_FUNCTIONS.contains(&v.id),
        _ => true,
    };
    visit_args(&c.args, walked, r);
}

fn visit_args(args: &[CallArg<'_>], walked: bool, r: &mut Rewriter<'_>) {
    for a in args {
        match a {
            CallArg::Pos(e) | CallArg::Kwarg(_, e) | CallArg::PosSplat(e) | CallArg::KwargSplat(e) => {
                if walked {
                    walk_edit(e, r);
                }
                visit_expr(e, r);
            }
        }
    }
}

fn visit_expr(expr: &Expr<'_>, r: &mut Rewriter<'_>) {
    match expr {
        Expr::Var(_) | Expr::Const(_) => {}
        Expr::Slice(s) => {
            visit_expr(&s.expr, r);
            for e in [&s.start, &s.stop, &s.step].into_iter().flatten() {
                visit_expr(e, r);
            }
        }
        Expr::UnaryOp(u) => visit_expr(&u.expr, r),
        Expr::BinOp(b) => {
            let function = match b.op {
                // `+` joins sequences only when both sides could be ones.
                ast::BinOpKind::Add if could_be_sequence(&b.left) && could_be_sequence(&b.right) => Some(ADD_FUNCTION),
                // `~` writes both sides out: one that is not a constant could be a shared nest.
                ast::BinOpKind::Concat if b.left.as_const().is_none() || b.right.as_const().is_none() => {
                    Some(CONCAT_FUNCTION)
                }
                _ => None,
            };
            if let Some(function) = function {
                let operator = if matches!(b.op, ast::BinOpKind::Add) { '+' } else { '~' };
                r.push(expr, Some((operator, offset(b.left.span().end_offset))), function);
            }
            // One comparison is a binary operator (a chain of them is `Compare`).
            use ast::BinOpKind::{Eq, Gt, Gte, In, Lt, Lte, Ne};
            if matches!(b.op, Eq | Ne | Lt | Lte | Gt | Gte | In) {
                walk_edit(&b.left, r);
                walk_edit(&b.right, r);
            }
            visit_expr(&b.left, r);
            visit_expr(&b.right, r);
        }
        Expr::Compare(c) => {
            walk_edit(&c.expr, r);
            visit_expr(&c.expr, r);
            for op in &c.ops {
                walk_edit(&op.expr, r);
                visit_expr(&op.expr, r);
            }
        }
        Expr::IfExpr(i) => {
            visit_expr(&i.test_expr, r);
            visit_expr(&i.true_expr, r);
            if let Some(e) = &i.false_expr {
                visit_expr(e, r);
            }
        }
        Expr::Filter(x) => {
            if let Some(e) = &x.expr {
                if !SHALLOW_FILTERS.contains(&x.name) {
                    walk_edit(e, r);
                }
                visit_expr(e, r);
            }
            visit_args(&x.args, true, r);
        }
        Expr::Test(t) => {
            if !SHALLOW_TESTS.contains(&t.name) {
                walk_edit(&t.expr, r);
            }
            visit_expr(&t.expr, r);
            visit_args(&t.args, true, r);
        }
        Expr::GetAttr(g) => visit_expr(&g.expr, r),
        Expr::GetItem(g) => {
            visit_expr(&g.expr, r);
            walk_edit(&g.subscript_expr, r);
            visit_expr(&g.subscript_expr, r);
        }
        Expr::Call(c) => visit_call(c, r),
        // A literal's items are nested one level deeper.
        Expr::List(l) => visit_items(&l.items, r),
        Expr::Tuple(t) => visit_items(&t.items, r),
        Expr::Map(m) => {
            for key in &m.keys {
                walk_edit(key, r);
                visit_expr(key, r);
            }
            visit_items(&m.values, r);
        }
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
fn walk_within_fuel(state: &State, value: &Value) -> Result<u64, JinjaError> {
    walk_indented_within_fuel(state, value, 0)
}

/// [`walk_within_fuel`], counting for each value the `indent` spaces a
/// level that `tojson(indent=…)` writes before it (and its line's end):
/// `range(50000)|list|tojson(indent=100000)` is 5 GB of spaces.
fn walk_indented_within_fuel(state: &State, value: &Value, indent: u64) -> Result<u64, JinjaError> {
    walk_values(state, value, indent, true, MAX_VALUE_DEPTH)
}

/// The walk of [`walk_indented_within_fuel`]; `text`: a string costs its
/// bytes too (a depth check counts values only); a value more than
/// `max_depth` levels below `value` is an error.
fn walk_values(state: &State, value: &Value, indent: u64, text: bool, max_depth: u64) -> Result<u64, JinjaError> {
    let Some((_, remaining)) = state.fuel_levels() else { return Ok(0) };
    let mut walk = Walk { budget: remaining.saturating_mul(64), walked: 0, indent, text, max_depth, open: Vec::new() };
    walk.visit(value, 0)?;
    // Depth first, one iterator per open list or map: what is held grows
    // with the depth, never with a list's length (`messages * 100000000`
    // is a lazy sequence of 100 million items; collecting them to walk
    // took gigabytes before the first was paid for).
    while let Some(top) = walk.open.last_mut() {
        let depth = top.depth + 1;
        let Some(item) = top.items.next() else {
            walk.open.pop();
            continue;
        };
        match top.map.clone() {
            Some(map) => {
                walk.visit(&item, depth)?;
                walk.visit(&map.get_item(&item)?, depth)?;
            }
            None => walk.visit(&item, depth)?,
        }
    }
    Ok(walk.walked)
}

/// The state of [`walk_indented_within_fuel`].
struct Walk {
    budget: u64,
    walked: u64,
    indent: u64,
    /// Whether a string's bytes are paid for, beside its eight.
    text: bool,
    /// The deepest level a value may lie at below the walk's root.
    max_depth: u64,
    open: Vec<OpenValue>,
}

/// A list or map being walked: its items (a map's keys) still to come.
struct OpenValue {
    items: minijinja::value::ValueIter,
    /// The map whose keys `items` are, to read their values.
    map: Option<Value>,
    depth: u64,
}

impl Walk {
    /// Pays for `v` (eight bytes, a string's bytes, its indentation) and
    /// opens it when it holds more.
    fn visit(&mut self, v: &Value, depth: u64) -> Result<(), JinjaError> {
        if depth > self.max_depth {
            return Err(JinjaError::new(
                ErrorKind::InvalidOperation,
                format!("a value nests deeper than {MAX_VALUE_DEPTH} levels"),
            ));
        }
        let text = if self.text { v.as_str().map_or(0, str::len) as u64 } else { 0 };
        let layout = if self.indent == 0 { 0 } else { self.indent.saturating_mul(depth).saturating_add(1) };
        let cost = layout.saturating_add(8 + text);
        self.budget = self.budget.checked_sub(cost).ok_or_else(|| JinjaError::from(ErrorKind::OutOfFuel))?;
        self.walked = self.walked.saturating_add(cost);
        let map = match v.kind() {
            ValueKind::Map => Some(v.clone()),
            ValueKind::Seq | ValueKind::Iterable => None,
            _ => return Ok(()),
        };
        self.open.try_reserve(1).map_err(|_| JinjaError::from(ErrorKind::OutOfFuel))?;
        self.open.push(OpenValue { items: v.try_iter()?, map, depth });
        Ok(())
    }
}

/// `value` itself, once [`walk_within_fuel`] has walked it and the walk is
/// paid for (64 bytes a unit): what a comparison, a hash or a conversion
/// to text of it can cost, bounded before minijinja does it unpaid.
pub fn walk(state: &State, value: Value) -> Result<Value, JinjaError> {
    let walked = walk_within_fuel(state, &value)?;
    state.consume_fuel(walked.div_ceil(64))?;
    Ok(value)
}

/// `value` itself, once checked to nest at most [`MAX_VALUE_DEPTH`] − 1
/// levels (it is about to be nested in another value), the check paid for
/// at a fuel unit per eight values it reached.
pub fn nest(state: &State, value: Value) -> Result<Value, JinjaError> {
    // One level is kept for the value it goes into.
    let walked = walk_values(state, &value, 0, false, MAX_VALUE_DEPTH - 1)?;
    state.consume_fuel(walked.div_ceil(64))?;
    Ok(value)
}

/// minijinja's `tojson`, after [`walk_within_fuel`]; the text is paid for
/// as minijinja pays (16 units a byte).
pub fn tojson(
    state: &State,
    value: &Value,
    indent: Option<Value>,
    args: minijinja::value::Kwargs,
) -> Result<Value, JinjaError> {
    // minijinja's `indent` is a number of spaces (or none).
    let given = indent.clone().or_else(|| args.peek::<Option<Value>>("indent").ok().flatten());
    let spaces = given.and_then(|i| u64::try_from(i).ok()).unwrap_or(0);
    walk_indented_within_fuel(state, value, spaces)?;
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
        rewrite_template(template, minijinja::syntax::SyntaxConfig::default()).unwrap()
    }

    fn render(template: &str) -> crate::Result<String> {
        ChatTemplate::new("test", template, "<s>", "</s>")?.render(&[ChatMessage::new("user", "hi")], true)
    }

    #[test]
    fn additions_that_could_join_sequences_are_rewritten() {
        let set = |t: &str| {
            rewrite(&format!("{{% set x = {t} %}}"))
                .strip_prefix("{% set x = ")
                .unwrap()
                .strip_suffix(" %}")
                .unwrap()
                .to_owned()
        };
        assert_eq!(set("a + b"), "__gantry_add(a , b)");
        // Nested and parenthesized operands keep their text.
        assert_eq!(set("(a + b) + (c)"), "__gantry_add((__gantry_add(a , b)) , (c))");
        assert_eq!(set("ns.l + [x]"), "__gantry_add(ns.l , [__gantry_nest(x)])");
        // `~` with anything but constants on both sides writes its operands out through Gantry's.
        assert_eq!(set("'a' ~ m.role ~ 'b'"), "__gantry_concat(__gantry_concat('a' , m.role) , 'b')");
        assert_eq!(set("'a' ~ 'b'"), "'a' ~ 'b'");
        // A string or number on either side cannot join sequences.
        assert_eq!(set("'<|im_start|>' + m.role + '\\n'"), "'<|im_start|>' + m.role + '\\n'");
        assert_eq!(set("loop.index0 + 1"), "loop.index0 + 1");
        assert_eq!(set("x - y"), "x - y");
        // Expressions in every statement are reached.
        assert_eq!(
            rewrite("{% macro m(x=a+b) %}{% for i in a+b if a+b %}{% endfor %}{% endmacro %}"),
            "{% macro m(x=__gantry_add(a,b)) %}{% for i in __gantry_add(a,b) if __gantry_add(a,b) %}{% endfor %}{% endmacro %}"
        );
    }

    #[test]
    fn values_read_deeply_are_walked_first() {
        // What `{{ }}` writes, unless a constant.
        assert_eq!(rewrite("{{ m.content }}{{ 'é' }}{{ 1 }}"), "{{ __gantry_walk(m.content) }}{{ 'é' }}{{ 1 }}");
        // Both sides of comparisons; a constant side as it is.
        assert_eq!(
            rewrite("{% if a == b and m.role != 'user' and x in xs %}{% endif %}"),
            "{% if __gantry_walk(a) == __gantry_walk(b) and __gantry_walk(m.role) != 'user' and __gantry_walk(x) in __gantry_walk(xs) %}{% endif %}"
        );
        // Subjects of deep filters and tests, not of shallow ones; their arguments.
        assert_eq!(
            rewrite("{% set y = xs|join(sep)|lower %}{% set n = xs|length %}{% set d = x|default(y) %}"),
            "{% set y = __gantry_walk(__gantry_walk(xs)|join(__gantry_walk(sep)))|lower %}{% set n = xs|length %}{% set d = x|default(__gantry_walk(y)) %}"
        );
        assert_eq!(
            rewrite("{% if x is defined and x is eq(y) and xs|select('in', ys) %}{% endif %}"),
            "{% if x is defined and __gantry_walk(x) is eq(__gantry_walk(y)) and __gantry_walk(xs)|select('in', __gantry_walk(ys)) %}{% endif %}"
        );
        // Arguments of methods and the environment's functions; not of macros.
        assert_eq!(
            rewrite("{% set a = m.get(k) %}{% set b = raise_exception(x) %}{% set c = my_macro(x) %}"),
            "{% set a = m.get(__gantry_walk(k)) %}{% set b = raise_exception(__gantry_walk(x)) %}{% set c = my_macro(x) %}"
        );
        // Subscripts and the keys of map literals.
        assert_eq!(
            rewrite("{% set a = {k: v}[i] %}{% set b = m['role'] %}"),
            "{% set a = {__gantry_walk(k): __gantry_nest(v)}[__gantry_walk(i)] %}{% set b = m['role'] %}"
        );
        // What could nest a value deeper: literal items, a namespace's attribute.
        assert_eq!(
            rewrite("{% set a = [x, 1, (y, 2)] %}{% set ns.x = v %}{% set z = w %}"),
            "{% set a = [__gantry_nest(x), 1, __gantry_nest((__gantry_nest(y), 2))] %}{% set ns.x = __gantry_nest(v) %}{% set z = w %}"
        );
        // Not the names an assignment binds.
        assert_eq!(
            rewrite("{% for k, v in m|items %}{% endfor %}{% for (a, b), c in x %}{% endfor %}{% set a, b = x %}"),
            "{% for k, v in m|items %}{% endfor %}{% for (a, b), c in x %}{% endfor %}{% set a, b = x %}"
        );
        // A walk and an addition of one span: the walk outside.
        assert_eq!(rewrite("{{ a + b }}"), "{{ __gantry_walk(__gantry_add(a , b)) }}");
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
    fn expressions_too_deep_to_compile_are_refused_by_line() {
        // Chains that minijinja parses without recursing but compiles and
        // drops recursively (they overflowed a 2 MiB stack), and a chain of
        // unary minus its parser recursed on.
        for (head, link) in [("x", ".a"), ("x", "[0]"), ("1", " + 1"), ("x", " or x"), ("", "-"), ("x", "|lower")] {
            let deep = format!("\n\n{{{{ {head}{} 1 }}}}", link.repeat(100_000));
            let deep = if head.is_empty() { deep } else { deep.replace(" 1 }}", " }}") };
            let error = ChatTemplate::new("test", &deep, "", "").unwrap_err().to_string();
            assert!(error.contains("more than 1000 deep at line 3"), "{link}: {error}");
        }
        // Chains across tags: `elif`s, ternaries, calls of calls.
        let elifs = format!("{{% if a %}}{}{{% endif %}}", "{% elif a %}".repeat(5000));
        let ternaries = format!("{{{{ x{} }}}}", " if x else x".repeat(5000));
        let calls = format!("{{{{ x{} }}}}", "()".repeat(5000));
        for deep in [elifs, ternaries, calls] {
            let error = ChatTemplate::new("test", &deep, "", "").unwrap_err().to_string();
            assert!(error.contains("more than 1000 deep"), "{error}");
        }
        // A block `set` inside an `if` does not end the `if`'s count.
        let hidden = format!("{{% if a %}}{{% set x %}}y{{% endset %}}{}{{% endif %}}", "{% elif a %}".repeat(5000));
        let error = ChatTemplate::new("test", &hidden, "", "").unwrap_err().to_string();
        assert!(error.contains("more than 1000 deep"), "{error}");
        // Blocks closed again do not count on: a thousand `if`s one after another.
        let flat = "{% if false %}{% elif true %}x{% endif %}".repeat(1000);
        assert_eq!(render(&flat).unwrap(), "x".repeat(1000));
        // Just under the bound compiles (and renders) on a 2 MiB thread, as `gantry serve` loads.
        let template = format!("{{{{ 1{} }}}}", " + 1".repeat(MAX_TEMPLATE_NESTING));
        let rendered =
            std::thread::Builder::new().stack_size(2 << 20).spawn(move || render(&template)).unwrap().join().unwrap();
        assert_eq!(rendered.unwrap(), (MAX_TEMPLATE_NESTING + 1).to_string());
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
            // A lazy repetition of 100 million items: the walk that pays for
            // writing it out reserved room for all of them first (3.2 GB).
            "{{ [1] * 100000000 }}",
            "{{ {'a': [1] * 100000000} }}",
        ] {
            let started = std::time::Instant::now();
            let error = render(template).unwrap_err().to_string();
            // The repetition is within this render's fuel to walk, not to write out.
            let stopped = ["ran out of fuel", "the prompt grew past"];
            assert!(stopped.iter().any(|s| error.contains(s)), "{template}: {error}");
            // Bounded: about 12 s here, in memory that does not grow with the
            // repetition (the walk collected its items first: 3.2 GB).
            assert!(started.elapsed().as_secs() < 120, "{template}: {:?}", started.elapsed());
        }
    }

    /// Renders `template` with the fuel of the longest chat (a message of 8 MiB
    /// brings it to [`Limits::max_template_fuel`](gantry_engine::Limits)) on a
    /// thread of 2 MiB, as small as the render threads of `gantry serve`.
    fn render_on_small_stack(template: &str) -> crate::Result<String> {
        let template = template.to_owned();
        std::thread::Builder::new()
            .stack_size(2 << 20)
            .spawn(move || {
                let long = "x".repeat(8 << 20);
                ChatTemplate::new("test", &template, "", "")?.render(&[ChatMessage::new("user", &long)], false)
            })
            .unwrap()
            .join()
            .unwrap()
    }

    #[test]
    fn values_nest_at_most_max_value_depth() {
        // Chains a hundred thousand deep within the longest chat's fuel:
        // writing one out, or dropping it, recursed once a level and
        // overflowed the stack (an abort) at a few thousand.
        for build in [
            "{% set ns = namespace(x={}) %}{% for i in range(100000) %}{% set ns.x = {'a': ns.x} %}{% endfor %}{{ ns.x }}",
            "{% set ns = namespace(x={}) %}{% for i in range(100000) %}{% set ns.x = {'a': ns.x} %}{% endfor %}done",
            "{% set ns = namespace(x=1) %}{% for i in range(100000) %}{% set ns.x = [ns.x] %}{% endfor %}done",
            "{% set ns = namespace(x=1) %}{% for i in range(100000) %}{% set ns.x = (ns.x,) %}{% endfor %}done",
            "{% set ns = namespace(x=none) %}{% for i in range(100000) %}{% set new = namespace() %}{% set new.x = ns.x %}{% set ns.x = new %}{% endfor %}done",
            "{% set ns = namespace(x=[1]) %}{% for i in range(100000) %}{% set ns.x = ns.x|batch(1) %}{% endfor %}done",
            "{% set ns = namespace(x=[1]) %}{% for i in range(100000) %}{% set ns.x = ns.x|slice(1) %}{% endfor %}done",
            "{% set ns = namespace(x=1) %}{% for i in range(100000) %}{% set ns.x = dict(a=ns.x) %}{% endfor %}done",
        ] {
            let error = render_on_small_stack(build).unwrap_err().to_string();
            assert!(error.contains("nests deeper than 256 levels"), "{build}: {error}");
        }
        // Up to the bound, values nest and are written out as before.
        let deep = "{% set ns = namespace(x=1) %}{% for i in range(255) %}{% set ns.x = [ns.x] %}{% endfor %}{{ ns.x|string|length }}";
        assert_eq!(render_on_small_stack(deep).unwrap(), (2 * 255 + 1).to_string());
    }

    #[test]
    fn reading_a_shared_nest_deeply_runs_out_of_fuel() {
        // Two nests of 2^30 values each, equal but not the same object:
        // minijinja took minutes comparing or writing them out, unpaid.
        let nests = "{% set ns = namespace(x=[], y=[]) %}{% for i in range(30) %}{% set ns.x = [ns.x, ns.x] %}{% set ns.y = [ns.y, ns.y] %}{% endfor %}";
        for read in [
            "{{ ns.x == ns.y }}",
            "{{ ns.x != ns.y }}",
            "{{ ns.x < ns.y }}",
            "{{ ns.x in [ns.y] }}",
            "{{ ns.x is eq(ns.y) }}",
            "{{ ns.x is in([ns.y]) }}",
            "{{ ns.x[0]|select('eq', ns.y[0])|list|length }}",
            "{{ ns.x|join|length }}",
            "{{ ns.x|lower|length }}",
            "{{ ns.x|replace('a', 'b')|length }}",
            "{{ '%s'|format(ns.x)|length }}",
            "{{ ns.x|safe|length }}",
            "{{ raise_exception(ns.x) }}",
            "{{ {'a': 1}.get(ns.x) }}",
            "{{ ns.x }}",
            "{% for i in [1, 2] %}{{ loop.changed(ns.x) }}{% endfor %}",
            // minijinja's `debug` is not there to write them out.
            "{{ debug(ns.x)|length }}",
            // Few values, but written with 100,000 spaces a level.
            "{{ range(50000)|list|tojson(indent=100000)|length }}",
            "{{ debug()|length }}",
        ] {
            let template = format!("{nests}{read}");
            let started = std::time::Instant::now();
            let error = render(&template).unwrap_err().to_string();
            // Since literal items pay for their depth check, building the
            // nests runs out first; `debug` is not there either way.
            let refused =
                error.contains("ran out of fuel") || read.contains("debug") && error.contains("unknown function");
            assert!(refused, "{read}: {error}");
            // Far below the minutes it took; generous for a debug build.
            assert!(started.elapsed().as_secs() < 20, "{read}: {:?}", started.elapsed());
        }
        // Nor `pprint` (cubic in the depth of what it prints, unpaid).
        assert!(render("{{ [1]|pprint }}").unwrap_err().to_string().contains("unknown filter"));
        // Reads of a smaller value in a loop are each paid for: 2^16 values
        // compared a thousand times.
        let repeated = "{% set ns = namespace(x=[], y=[]) %}{% for i in range(16) %}{% set ns.x = [ns.x, ns.x] %}{% set ns.y = [ns.y, ns.y] %}{% endfor %}{% for i in range(1000) %}{% if ns.x == ns.y %}{% endif %}{% endfor %}";
        assert!(render(repeated).unwrap_err().to_string().contains("ran out of fuel"));
    }
}
