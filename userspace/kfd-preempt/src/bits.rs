//! Naming the bits of a flag word, for `Caps` and `QueueState`.

/// The names of the bits of `value` that `known` names, in `known`'s order,
/// then whatever bits are left as one `0x..`.
pub(crate) fn names(value: u64, known: &[(u64, &str)]) -> Vec<String> {
    let mut rest = value;
    let mut names = Vec::new();
    for &(bit, name) in known {
        if value & bit != 0 {
            names.push(name.to_string());
            rest &= !bit;
        }
    }
    if rest != 0 {
        names.push(format!("{rest:#x}"));
    }
    names
}
