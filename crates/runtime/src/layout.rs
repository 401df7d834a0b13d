//! Field tables of the structs that `kwb_trace.cuh` and this crate both declare.
//!
//! Every mirrored struct is declared with `mirror!`, which also derives its `FIELDS`
//! table from the Rust layout itself (`offset_of!`). The layout test parses the
//! header's declarations and compares them with these tables, so a change to one side
//! that the other does not follow fails the build.

/// One field of a mirrored struct: its name, byte offset and size in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Field {
    /// The field's name, the same in the header and in Rust.
    pub name: &'static str,
    /// The byte offset from the start of the struct.
    pub offset: usize,
    /// The size in bytes (of the whole array for an array field).
    pub size: usize,
}

/// Declares a `#[repr(C)]` struct with public fields and a `FIELDS` table of them.
macro_rules! mirror {
    (
        $(#[$meta:meta])*
        pub struct $name:ident {
            $(
                $(#[$field_meta:meta])*
                pub $field:ident : $ty:ty,
            )*
        }
    ) => {
        $(#[$meta])*
        pub struct $name {
            $(
                $(#[$field_meta])*
                pub $field: $ty,
            )*
        }

        impl $name {
            /// The fields in declaration order, with their offsets and sizes.
            pub const FIELDS: &'static [$crate::layout::Field] = &[
                $(
                    $crate::layout::Field {
                        name: stringify!($field),
                        offset: ::std::mem::offset_of!($name, $field),
                        size: ::std::mem::size_of::<$ty>(),
                    },
                )*
            ];
        }
    };
}

pub(crate) use mirror;

/// A little-endian reader over a slice whose length the caller has checked.
pub(crate) struct Le<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Le<'a> {
    pub(crate) fn new(bytes: &'a [u8]) -> Self {
        Le { bytes, pos: 0 }
    }

    pub(crate) fn array<const N: usize>(&mut self) -> [u8; N] {
        let mut out = [0; N];
        out.copy_from_slice(&self.bytes[self.pos..self.pos + N]);
        self.pos += N;
        out
    }

    pub(crate) fn u32(&mut self) -> u32 {
        u32::from_le_bytes(self.array())
    }

    pub(crate) fn i32(&mut self) -> i32 {
        i32::from_le_bytes(self.array())
    }

    pub(crate) fn u64(&mut self) -> u64 {
        u64::from_le_bytes(self.array())
    }

    pub(crate) fn f32(&mut self) -> f32 {
        f32::from_le_bytes(self.array())
    }

    pub(crate) fn f32s<const N: usize>(&mut self) -> [f32; N] {
        std::array::from_fn(|_| self.f32())
    }

    pub(crate) fn i32s<const N: usize>(&mut self) -> [i32; N] {
        std::array::from_fn(|_| self.i32())
    }
}
