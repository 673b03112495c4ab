//! Enums whose variants have names in the result contract (`"f64"`, `"seq"`, `"io_uring"`):
//! one declaration generates the variant list, the name, the parser and its error.
//!
//! Every subsystem has several such enums, and each used to carry a hand-written `name`, a
//! hand-written `parse` and an "expected …" list in its error message that had to be kept in step
//! with both. [`named_enum!`] writes all three from one table, so a variant added is a variant
//! named, parsed and listed.

/// `a, b or c`: the names a parser accepts, for its error message.
pub fn expected_list(names: &[&str]) -> String {
    match names {
        [] => String::new(),
        [one] => (*one).to_string(),
        [rest @ .., last] => format!("{} or {last}", rest.join(", ")),
    }
}

/// Declare an enum with a contract name (and optional aliases) per variant:
///
/// ```
/// hostbench_core::named_enum! {
///     /// Block visit order.
///     #[derive(Debug, Clone, Copy, PartialEq, Eq)]
///     pub enum Order("pattern") {
///         Seq = "seq" | "sequential",
///         Random = "random" | "rand",
///     }
/// }
/// assert_eq!(Order::parse(" Sequential ").unwrap(), Order::Seq);
/// assert_eq!(Order::Random.name(), "random");
/// assert_eq!(Order::ALL.len(), 2);
/// let e = Order::parse("zigzag").unwrap_err().to_string();
/// assert!(e.contains("unknown pattern 'zigzag' (expected seq or random)"), "{e}");
/// ```
///
/// Generates `ALL` (declaration order), `name()`, `parse()` (trimmed, case-insensitive, aliases
/// accepted; an unknown word is a `BenchError::InvalidInput` naming it and every name) and
/// `Display` (the name).
#[macro_export]
macro_rules! named_enum {
    (
        $(#[$meta:meta])*
        $vis:vis enum $Name:ident ($what:literal) {
            $( $(#[$vmeta:meta])* $Variant:ident = $name:literal $(| $alias:literal)* ),+ $(,)?
        }
    ) => {
        $(#[$meta])*
        $vis enum $Name {
            $( $(#[$vmeta])* $Variant ),+
        }

        impl $Name {
            /// Every variant, in declaration order.
            pub const ALL: [$Name; [$($name),+].len()] = [$($Name::$Variant),+];

            /// The name in the result contract.
            pub fn name(self) -> &'static str {
                match self {
                    $($Name::$Variant => $name),+
                }
            }

            /// Parse a name or alias (trimmed, case-insensitive).
            pub fn parse(s: &str) -> Result<Self, $crate::BenchError> {
                let t = s.trim().to_ascii_lowercase();
                $(
                    if t == $name $(|| t == $alias)* {
                        return Ok($Name::$Variant);
                    }
                )+
                Err($crate::BenchError::invalid(format!(
                    "unknown {} '{}' (expected {})",
                    $what,
                    s.trim(),
                    $crate::named::expected_list(&[$($name),+])
                )))
            }
        }

        impl ::std::fmt::Display for $Name {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                f.write_str(self.name())
            }
        }
    };
}

#[cfg(test)]
mod tests {
    use super::expected_list;

    crate::named_enum! {
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        enum Kind("kind") {
            Alpha = "alpha" | "a",
            Beta = "beta",
            Gamma = "gamma",
        }
    }

    #[test]
    fn names_parse_and_list_from_one_table() {
        assert_eq!(Kind::ALL, [Kind::Alpha, Kind::Beta, Kind::Gamma]);
        for k in Kind::ALL {
            assert_eq!(Kind::parse(k.name()).unwrap(), k);
            assert_eq!(k.to_string(), k.name());
        }
        assert_eq!(Kind::parse(" A ").unwrap(), Kind::Alpha);
        let e = Kind::parse("delta").unwrap_err().to_string();
        assert!(
            e.contains("unknown kind 'delta' (expected alpha, beta or gamma)"),
            "{e}"
        );
        assert_eq!(expected_list(&["x"]), "x");
        assert_eq!(expected_list(&[]), "");
    }
}
