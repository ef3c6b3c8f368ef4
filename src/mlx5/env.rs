//! libmlx5's environment variables that change what the direct path must do,
//! read once at set-up (never in the hot loop), parsed as libmlx5 parses
//! them (rdma-core `providers/mlx5/mlx5.c`):
//!
//! - `MLX5_QP_SIGNATURE` (any value): libmlx5 creates QPs that expect a WQE
//!   signature. The direct path writes none, so it refuses to run.
//! - `MLX5_SHUT_UP_BF` (set and not "0"): libmlx5 never uses BlueFlame; the
//!   direct path then rings 8-byte doorbells only.
//! - `MLX5_POST_SEND_PREFER_BF` ("0"): libmlx5 uses BlueFlame only for a
//!   single WQE with inline data (`post_send_db`: `inl || prefer_bf`); so
//!   does the direct path.
//! - `MLX5_CQE_SIZE` (64 or 128): the CQE size libmlx5 creates CQs with; the
//!   poller reads the 64-byte CQE in the second half of a 128-byte one.
//!   It arrives through `mlx5dv_cq.cqe_size`; read here only to report it.

use std::fmt;

/// The variables' names, in the order they are reported.
pub const VARS: [&str; 5] = [
    "MLX5_QP_SIGNATURE",
    "MLX5_SHUT_UP_BF",
    "MLX5_POST_SEND_PREFER_BF",
    "MLX5_CQE_SIZE",
    "MLX5_SCATTER_TO_CQE",
];

/// When the doorbell may use BlueFlame (libmlx5's `shut_up_bf`, `prefer_bf`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BfPolicy {
    /// `MLX5_SHUT_UP_BF`: never BlueFlame.
    pub shut_up: bool,
    /// `MLX5_POST_SEND_PREFER_BF` (default on): BlueFlame also for WQEs
    /// without inline data.
    pub prefer: bool,
}

impl Default for BfPolicy {
    fn default() -> Self {
        Self {
            shut_up: false,
            prefer: true,
        }
    }
}

/// The values found (None: unset), from [`Mlx5Env::from_process`] or, in
/// tests, [`Mlx5Env::parse`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Mlx5Env {
    /// (name, value) of each variable in [`VARS`] that is set.
    pub set: Vec<(&'static str, String)>,
}

impl Mlx5Env {
    /// Reads [`VARS`] through `lookup` (e.g. a test's table).
    pub fn parse(lookup: impl Fn(&str) -> Option<String>) -> Self {
        let set = VARS
            .iter()
            .filter_map(|&n| lookup(n).map(|v| (n, v)))
            .collect();
        Self { set }
    }

    /// Reads [`VARS`] from a table of (name, value) pairs (tests).
    pub fn from_pairs(pairs: &[(&str, &str)]) -> Self {
        Self::parse(|n| {
            pairs
                .iter()
                .find(|(k, _)| *k == n)
                .map(|(_, v)| v.to_string())
        })
    }

    /// Reads the process environment (once, at set-up).
    pub fn from_process() -> Self {
        Self::parse(|n| std::env::var_os(n).map(|v| v.to_string_lossy().into_owned()))
    }

    pub fn get(&self, name: &str) -> Option<&str> {
        self.set
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v.as_str())
    }

    /// libmlx5's `get_shut_up_bf` / `get_always_bf`: set and not "0" /
    /// unset or not "0".
    pub fn bf_policy(&self) -> BfPolicy {
        BfPolicy {
            shut_up: self.get("MLX5_SHUT_UP_BF").is_some_and(|v| v != "0"),
            prefer: self.get("MLX5_POST_SEND_PREFER_BF") != Some("0"),
        }
    }

    /// Why the direct path must not run in this environment, if it must not.
    pub fn refusal(&self) -> Option<String> {
        self.get("MLX5_QP_SIGNATURE").map(|v| {
            format!(
                "MLX5_QP_SIGNATURE={v} is set: libmlx5 then creates QPs that check a WQE \
                 signature, which the direct path does not write (every WQE would complete \
                 with an error); unset MLX5_QP_SIGNATURE"
            )
        })
    }

    /// What the banner says about the doorbell, when it differs from the default.
    pub fn doorbell_note(&self) -> Option<String> {
        let p = self.bf_policy();
        if p.shut_up {
            let v = self.get("MLX5_SHUT_UP_BF").unwrap_or("");
            Some(format!(
                "MLX5_SHUT_UP_BF={v}: 8-byte doorbells only, no BlueFlame, as libmlx5"
            ))
        } else if !p.prefer {
            Some(
                "MLX5_POST_SEND_PREFER_BF=0: BlueFlame only for single inline WQEs, 8-byte \
                 doorbells otherwise, as libmlx5"
                    .into(),
            )
        } else {
            None
        }
    }
}

impl fmt::Display for Mlx5Env {
    /// `MLX5_SHUT_UP_BF=1 MLX5_CQE_SIZE=128`, or `none set`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.set.is_empty() {
            return write!(f, "none set");
        }
        for (i, (n, v)) in self.set.iter().enumerate() {
            if i > 0 {
                f.write_str(" ")?;
            }
            write!(f, "{n}={v}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> Mlx5Env {
        Mlx5Env::from_pairs(pairs)
    }

    #[test]
    fn bf_policy_parses_as_libmlx5() {
        assert_eq!(env(&[]).bf_policy(), BfPolicy::default());
        let p = |k, v| env(&[(k, v)]).bf_policy();
        assert!(p("MLX5_SHUT_UP_BF", "1").shut_up);
        assert!(p("MLX5_SHUT_UP_BF", "yes").shut_up);
        assert!(!p("MLX5_SHUT_UP_BF", "0").shut_up);
        assert!(!p("MLX5_POST_SEND_PREFER_BF", "0").prefer);
        assert!(p("MLX5_POST_SEND_PREFER_BF", "1").prefer);
        assert!(p("MLX5_POST_SEND_PREFER_BF", "").prefer);
    }

    #[test]
    fn qp_signature_refuses_naming_the_variable() {
        assert_eq!(env(&[]).refusal(), None);
        let r = env(&[("MLX5_QP_SIGNATURE", "")]).refusal().unwrap();
        assert!(
            r.contains("MLX5_QP_SIGNATURE") && r.contains("unset"),
            "{r}"
        );
    }

    #[test]
    fn display_and_notes() {
        assert_eq!(env(&[]).to_string(), "none set");
        let e = env(&[("MLX5_CQE_SIZE", "128"), ("MLX5_SHUT_UP_BF", "1")]);
        assert_eq!(e.to_string(), "MLX5_SHUT_UP_BF=1 MLX5_CQE_SIZE=128");
        assert!(e.doorbell_note().unwrap().contains("8-byte doorbells only"));
        assert_eq!(env(&[("MLX5_SHUT_UP_BF", "0")]).doorbell_note(), None);
    }
}
