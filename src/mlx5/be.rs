//! Big-endian field types for PRM structures.
//!
//! Each is a byte array, so a `#[repr(C)]` struct built from them has
//! alignment 1 and exactly the packed C layout, and a value can only be
//! stored through `new` (host → big-endian), never in host order by accident.

use core::fmt;

macro_rules! be_type {
    ($name:ident, $int:ty, $n:literal) => {
        #[derive(Clone, Copy, Default, PartialEq, Eq, Hash)]
        #[repr(transparent)]
        pub struct $name(pub [u8; $n]);

        impl $name {
            /// Encodes a host-order value.
            #[inline(always)]
            pub const fn new(v: $int) -> Self {
                Self(v.to_be_bytes())
            }
            /// Decodes to host order.
            #[inline(always)]
            pub const fn get(self) -> $int {
                <$int>::from_be_bytes(self.0)
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}({:#x})", stringify!($name), self.get())
            }
        }
    };
}

be_type!(Be16, u16, 2);
be_type!(Be32, u32, 4);
be_type!(Be64, u64, 8);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_order_is_network_order() {
        assert_eq!(Be16::new(0x1234).0, [0x12, 0x34]);
        assert_eq!(Be32::new(0x1234_5678).0, [0x12, 0x34, 0x56, 0x78]);
        assert_eq!(Be64::new(0x0102_0304_0506_0708).0, [1, 2, 3, 4, 5, 6, 7, 8]);
        assert_eq!(Be32::new(0xdead_beef).get(), 0xdead_beef);
    }
}
