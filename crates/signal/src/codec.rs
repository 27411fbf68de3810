//! Field encoding: little-endian integers at fixed positions, length-prefixed
//! variable parts. Every read is bounds-checked; a length is trusted only after
//! it has been checked against the bytes that are really there, so a hostile
//! length can never make the decoder allocate more than the frame it came in.

use crate::ids::{BlockNumber, BlockRef, Chain, NodeBitmask, NodeId, CHAIN_MAX};
use crate::DecodeError;

/// Reads fields from one signal body.
pub struct Reader<'a> {
    bytes: &'a [u8],
    position: usize,
}

impl<'a> Reader<'a> {
    #[inline]
    pub fn new(bytes: &'a [u8]) -> Reader<'a> {
        Reader { bytes, position: 0 }
    }

    #[inline]
    pub fn remaining(&self) -> usize {
        self.bytes.len() - self.position
    }

    #[inline]
    pub fn take(&mut self, len: usize) -> Result<&'a [u8], DecodeError> {
        if len > self.remaining() {
            return Err(DecodeError::Truncated {
                needed: len,
                available: self.remaining(),
            });
        }
        let slice = &self.bytes[self.position..self.position + len];
        self.position += len;
        Ok(slice)
    }

    #[inline]
    pub(crate) fn array<const N: usize>(&mut self) -> Result<[u8; N], DecodeError> {
        let slice = self.take(N)?;
        let mut out = [0u8; N];
        out.copy_from_slice(slice);
        Ok(out)
    }
}

/// A value with a wire encoding.
pub trait Field: Sized {
    fn put(&self, out: &mut Vec<u8>);
    fn take(reader: &mut Reader<'_>) -> Result<Self, DecodeError>;

    /// Appends the elements of a list, one after the other (the list's
    /// count is written by the caller). A type whose encoding is its memory
    /// (`u8`) overrides this with one bulk copy: byte strings (op batches,
    /// results) are the bulk of the traffic.
    fn put_all(items: &[Self], out: &mut Vec<u8>) {
        for item in items {
            item.put(out);
        }
    }

    /// Reads `count` elements, `count` already checked against the bytes
    /// left; the bulk counterpart of [`Field::put_all`].
    fn take_all(reader: &mut Reader<'_>, count: usize) -> Result<Vec<Self>, DecodeError> {
        let mut items = Vec::with_capacity(count);
        for _ in 0..count {
            items.push(Self::take(reader)?);
        }
        Ok(items)
    }
}

macro_rules! int_field {
    ($($ty:ty),*) => {$(
        impl Field for $ty {
            #[inline]
            fn put(&self, out: &mut Vec<u8>) {
                out.extend_from_slice(&self.to_le_bytes());
            }
            #[inline]
            fn take(reader: &mut Reader<'_>) -> Result<Self, DecodeError> {
                Ok(<$ty>::from_le_bytes(reader.array()?))
            }
        }
    )*};
}
int_field!(u16, u32, u64, i64);

impl Field for u8 {
    #[inline]
    fn put(&self, out: &mut Vec<u8>) {
        out.push(*self);
    }
    #[inline]
    fn take(reader: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Ok(reader.array::<1>()?[0])
    }
    #[inline]
    fn put_all(items: &[u8], out: &mut Vec<u8>) {
        out.extend_from_slice(items);
    }
    #[inline]
    fn take_all(reader: &mut Reader<'_>, count: usize) -> Result<Vec<u8>, DecodeError> {
        // Into a buffer this thread kept from a payload it consumed.
        Ok(crate::buffers::filled(reader.take(count)?))
    }
}

impl Field for bool {
    fn put(&self, out: &mut Vec<u8>) {
        out.push(u8::from(*self));
    }
    fn take(reader: &mut Reader<'_>) -> Result<Self, DecodeError> {
        match u8::take(reader)? {
            0 => Ok(false),
            1 => Ok(true),
            other => Err(DecodeError::BadValue {
                field: "bool",
                value: u64::from(other),
            }),
        }
    }
}

impl Field for NodeId {
    #[inline]
    fn put(&self, out: &mut Vec<u8>) {
        out.push(self.get());
    }
    #[inline]
    fn take(reader: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let raw = u8::take(reader)?;
        NodeId::new(raw).ok_or(DecodeError::BadValue {
            field: "node id",
            value: 0,
        })
    }
}

impl Field for Chain {
    #[inline]
    fn put(&self, out: &mut Vec<u8>) {
        (self.len() as u32).put(out);
        for node in self.iter() {
            node.put(out);
        }
    }
    #[inline]
    fn take(reader: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let count = u32::take(reader)?;
        if count as usize > CHAIN_MAX {
            return Err(DecodeError::BadValue {
                field: "chain length",
                value: u64::from(count),
            });
        }
        let mut chain = Chain::new();
        for _ in 0..count {
            chain.push(NodeId::take(reader)?);
        }
        Ok(chain)
    }
}

impl Field for BlockRef {
    #[inline]
    fn put(&self, out: &mut Vec<u8>) {
        self.node.put(out);
        self.block.0.put(out);
        self.instance.put(out);
    }
    #[inline]
    fn take(reader: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let node = NodeId::take(reader)?;
        let block = BlockNumber(u8::take(reader)?);
        let instance = u16::take(reader)?;
        Ok(BlockRef::new(node, block, instance))
    }
}

/// A node id where 0 means "none".
impl Field for Option<NodeId> {
    fn put(&self, out: &mut Vec<u8>) {
        out.push(self.map_or(0, NodeId::get));
    }
    fn take(reader: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Ok(NodeId::new(u8::take(reader)?))
    }
}

impl Field for NodeBitmask {
    fn put(&self, out: &mut Vec<u8>) {
        for word in self.0 {
            out.extend_from_slice(&word.to_le_bytes());
        }
    }
    fn take(reader: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let mut mask = NodeBitmask::new();
        for word in mask.0.iter_mut() {
            *word = u64::take(reader)?;
        }
        if mask.0[0] & 1 != 0 {
            return Err(DecodeError::BadValue {
                field: "node bitmask (bit 0 set)",
                value: 1,
            });
        }
        Ok(mask)
    }
}

impl Field for String {
    fn put(&self, out: &mut Vec<u8>) {
        let len = u32::try_from(self.len()).expect("string fits a frame");
        len.put(out);
        out.extend_from_slice(self.as_bytes());
    }
    fn take(reader: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let len = u32::take(reader)? as usize;
        let bytes = reader.take(len)?;
        std::str::from_utf8(bytes)
            .map(str::to_owned)
            .map_err(|_| DecodeError::BadUtf8)
    }
}

/// A list's count and items (a `Vec` or a `SmallVec`: the same bytes).
#[inline]
fn put_list<T: Field>(items: &[T], out: &mut Vec<u8>) {
    let count = u32::try_from(items.len()).expect("list fits a frame");
    count.put(out);
    T::put_all(items, out);
}

/// A list's count, refused when it cannot be true.
#[inline]
fn take_count(reader: &mut Reader<'_>) -> Result<usize, DecodeError> {
    let count = u32::take(reader)? as usize;
    // Every element takes at least one byte, so a count beyond the bytes
    // left is a lie: refuse it before allocating.
    if count > reader.remaining() {
        return Err(DecodeError::Truncated {
            needed: count,
            available: reader.remaining(),
        });
    }
    Ok(count)
}

impl<T: Field> Field for Vec<T> {
    #[inline]
    fn put(&self, out: &mut Vec<u8>) {
        put_list(self, out);
    }
    #[inline]
    fn take(reader: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let count = take_count(reader)?;
        T::take_all(reader, count)
    }
}

/// As a `Vec`'s list: the same bytes, so either type may carry a list.
impl<A> Field for smallvec::SmallVec<A>
where
    A: smallvec::Array,
    A::Item: Field,
{
    #[inline]
    fn put(&self, out: &mut Vec<u8>) {
        put_list(self, out);
    }
    #[inline]
    fn take(reader: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let count = take_count(reader)?;
        let mut list = smallvec::SmallVec::with_capacity(count);
        for _ in 0..count {
            list.push(A::Item::take(reader)?);
        }
        Ok(list)
    }
}

/// Defines a plain struct whose fields are encoded in declaration order.
#[macro_export]
macro_rules! wire_struct {
    ($(#[$meta:meta])* pub struct $name:ident { $($(#[$fmeta:meta])* pub $field:ident : $ty:ty),* $(,)? }) => {
        $(#[$meta])*
        #[derive(Clone, Debug, PartialEq, Eq)]
        pub struct $name { $($(#[$fmeta])* pub $field: $ty),* }

        impl $crate::codec::Field for $name {
            fn put(&self, out: &mut Vec<u8>) {
                $( $crate::codec::Field::put(&self.$field, out); )*
            }
            fn take(reader: &mut $crate::codec::Reader<'_>) -> Result<Self, $crate::DecodeError> {
                Ok($name { $($field: $crate::codec::Field::take(reader)?),* })
            }
        }
    };
}

/// Defines a fieldless enum encoded as one byte; unknown bytes are refused.
#[macro_export]
macro_rules! wire_enum {
    ($(#[$meta:meta])* pub enum $name:ident { $($(#[$vmeta:meta])* $variant:ident = $value:literal),* $(,)? }) => {
        $(#[$meta])*
        #[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
        #[repr(u8)]
        pub enum $name { $($(#[$vmeta])* $variant = $value),* }

        impl $name {
            pub const ALL: &'static [$name] = &[$($name::$variant),*];
        }

        impl $crate::codec::Field for $name {
            fn put(&self, out: &mut Vec<u8>) {
                out.push(*self as u8);
            }
            fn take(reader: &mut $crate::codec::Reader<'_>) -> Result<Self, $crate::DecodeError> {
                match <u8 as $crate::codec::Field>::take(reader)? {
                    $($value => Ok($name::$variant),)*
                    other => Err($crate::DecodeError::BadValue {
                        field: stringify!($name),
                        value: u64::from(other),
                    }),
                }
            }
        }
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(n: u8) -> NodeId {
        NodeId::new(n).unwrap()
    }

    #[test]
    fn a_chain_is_on_the_wire_as_a_list_of_nodes_and_at_most_chain_max() {
        for nodes in [vec![], vec![node(3)], vec![node(2), node(9), node(4)]] {
            let chain: Chain = nodes.iter().copied().collect();
            let (mut as_chain, mut as_list) = (Vec::new(), Vec::new());
            chain.put(&mut as_chain);
            nodes.put(&mut as_list);
            assert_eq!(as_chain, as_list, "{nodes:?}");
            let mut reader = Reader::new(&as_chain);
            assert_eq!(Chain::take(&mut reader).unwrap(), chain);
            assert_eq!(
                chain.rest().iter().collect::<Vec<_>>(),
                nodes.get(1..).unwrap_or(&[])
            );
        }
        let mut too_long = Vec::new();
        vec![node(1); CHAIN_MAX + 1].put(&mut too_long);
        assert!(matches!(
            Chain::take(&mut Reader::new(&too_long)),
            Err(DecodeError::BadValue {
                field: "chain length",
                ..
            })
        ));
    }

    /// A `RefChain` is a `Vec`'s list on the wire, inline or spilled, and
    /// a count past the bytes is refused before anything is allocated.
    #[test]
    fn a_ref_chain_has_the_bytes_of_a_list() {
        let ldm = |n: u8, i: u16| BlockRef::new(node(n), BlockNumber::LOCAL_DATA_MANAGER, i);
        let long: Vec<BlockRef> = (1..=9).map(|n| ldm(n, u16::from(n) * 3)).collect();
        for refs in [vec![], vec![ldm(4, 1)], long] {
            let chain = crate::RefChain::from_slice(&refs);
            let (mut as_chain, mut as_list) = (Vec::new(), Vec::new());
            chain.put(&mut as_chain);
            refs.put(&mut as_list);
            assert_eq!(as_chain, as_list, "{refs:?}");
            let back = crate::RefChain::take(&mut Reader::new(&as_chain)).unwrap();
            assert_eq!(back, chain);
            assert_eq!(back.spilled(), refs.len() > crate::ids::REF_CHAIN_INLINE);
        }
        let mut lying = Vec::new();
        u32::MAX.put(&mut lying);
        assert!(matches!(
            crate::RefChain::take(&mut Reader::new(&lying)),
            Err(DecodeError::Truncated { .. })
        ));
    }
}
