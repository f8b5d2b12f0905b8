//! The tensors of a file that a model's graph does not use: every loader
//! refuses them by name rather than compute without them (a layer past the
//! configured count, another family's norm, a tensor of unknown meaning).

/// `None` when every name of `names` is `used`, else the unused ones for an
/// error, sorted: `'a', 'b', 'c', 'd' and 3 more`.
pub(crate) fn unused_shown<'a>(names: impl Iterator<Item = &'a str>, used: impl Fn(&str) -> bool) -> Option<String> {
    let mut unused: Vec<&str> = names.filter(|n| !used(n)).collect();
    if unused.is_empty() {
        return None;
    }
    unused.sort_unstable();
    let shown = unused.iter().take(4).map(|n| format!("'{n}'")).collect::<Vec<_>>().join(", ");
    let more = if unused.len() > 4 { format!(" and {} more", unused.len() - 4) } else { String::new() };
    Some(format!("{shown}{more}"))
}

#[cfg(test)]
mod tests {
    use super::unused_shown;

    #[test]
    fn unused_names_are_sorted_and_the_rest_counted() {
        let names = ["f", "a", "e", "used", "d", "c", "b"];
        assert_eq!(unused_shown(names.into_iter(), |n| n == "used").unwrap(), "'a', 'b', 'c', 'd' and 2 more");
        assert_eq!(unused_shown(["x", "used"].into_iter(), |n| n == "used").unwrap(), "'x'");
        assert_eq!(unused_shown(["used"].into_iter(), |n| n == "used"), None);
    }
}
