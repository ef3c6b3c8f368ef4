//! `value_newtype!`: one declaration for a value the device or a library
//! hands back.
//!
//! Such values are newtypes over the integer, never Rust enums: a value this
//! build does not know (a newer kernel's port state, a vendor opcode) must stay
//! representable and printable, where transmuting it into an enum would be
//! undefined behaviour. Each of them was the same three pieces written by hand
//! (the struct, its named constants, and a `name()` that listed every constant
//! a second time); the macro writes them from one list, so a constant and its
//! name cannot drift apart.
//!
//! ```text
//! value_newtype! {
//!     /// `enum ibv_port_state` as a newtype.
//!     #[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
//!     pub struct PortState(u32);
//!     /// The name `ibv_devinfo` prints.
//!     name or "PORT_UNKNOWN" {
//!         NOP = sys::IBV_PORT_NOP => "PORT_NOP",
//!         ACTIVE = sys::IBV_PORT_ACTIVE => "PORT_ACTIVE",
//!     }
//! }
//! ```
//!
//! Where each name is a common prefix and the constant's own name (rdma-core's
//! `MLX5_OPCODE_SEND` for `SEND`), `name "MLX5_OPCODE_" or "UNKNOWN" { SEND = 0x0a, }`
//! writes it from the constant, so the name is not spelled twice.
//!
//! Without the `name or "…"` line the type gets its constants only (for
//! values whose names come from elsewhere, such as librdmacm's
//! `rdma_event_str`). Methods beyond these go in an `impl` block of their own.

/// See the module documentation.
macro_rules! value_newtype {
    (
        $(#[$meta:meta])*
        $vis:vis struct $ty:ident($repr:ty);
        $(#[$name_doc:meta])*
        name or $unknown:literal {
            $($(#[$c_doc:meta])* $c:ident = $val:expr => $text:expr,)*
        }
    ) => {
        value_newtype! {
            $(#[$meta])*
            $vis struct $ty($repr);
            consts { $($(#[$c_doc])* $c = $val,)* }
        }

        impl $ty {
            $(#[$name_doc])*
            /// A value not listed here reads as the fallback name.
            pub const fn name(self) -> &'static str {
                // First match wins, so two constants may share a name.
                $(if self.0 == $val {
                    return $text;
                })*
                $unknown
            }
        }
    };
    (
        $(#[$meta:meta])*
        $vis:vis struct $ty:ident($repr:ty);
        $(#[$name_doc:meta])*
        name $prefix:literal or $unknown:literal {
            $($(#[$c_doc:meta])* $c:ident = $val:expr,)*
        }
    ) => {
        value_newtype! {
            $(#[$meta])*
            $vis struct $ty($repr);
            $(#[$name_doc])*
            name or $unknown {
                $($(#[$c_doc])* $c = $val => concat!($prefix, stringify!($c)),)*
            }
        }
    };
    (
        $(#[$meta:meta])*
        $vis:vis struct $ty:ident($repr:ty);
        consts {
            $($(#[$c_doc:meta])* $c:ident = $val:expr,)*
        }
    ) => {
        $(#[$meta])*
        #[repr(transparent)]
        $vis struct $ty(pub $repr);

        impl $ty {
            $($(#[$c_doc])* pub const $c: Self = Self($val);)*
        }
    };
}

pub(crate) use value_newtype;

#[cfg(test)]
mod tests {
    value_newtype! {
        #[derive(Clone, Copy, PartialEq, Eq, Debug)]
        struct Demo(u8);
        name or "UNKNOWN" {
            A = 1 => "A",
            B = 2 => "B",
            B_TOO = 3 => "B",
        }
    }

    value_newtype! {
        #[derive(Clone, Copy, PartialEq, Eq, Debug)]
        struct Bare(u32);
        consts {
            X = 7,
        }
    }

    value_newtype! {
        #[derive(Clone, Copy, PartialEq, Eq, Debug)]
        struct Prefixed(u8);
        name "PRE_" or "UNKNOWN" {
            ONE = 1,
            TWO_WORDS = 2,
        }
    }

    #[test]
    fn a_prefixed_name_is_the_prefix_and_the_constant() {
        assert_eq!(Prefixed::ONE.name(), "PRE_ONE");
        assert_eq!(Prefixed::TWO_WORDS.name(), "PRE_TWO_WORDS");
        assert_eq!(Prefixed(9).name(), "UNKNOWN");
    }

    #[test]
    fn names_constants_and_unknown_values() {
        assert_eq!(Demo::A, Demo(1));
        assert_eq!(Demo::B.name(), "B");
        assert_eq!(Demo::B_TOO.name(), "B");
        assert_eq!(Demo(9).name(), "UNKNOWN");
        assert_eq!(Bare::X.0, 7);
        assert_eq!(std::mem::size_of::<Demo>(), 1);
    }
}
