//! The direction of a packet within its connection.

/// Direction of a packet within its connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "lowercase"))]
pub enum Dir {
    /// The direction of the packet that created the connection.
    #[default]
    Orig,
    /// The other direction.
    Reply,
}

impl Dir {
    /// 0 for original, 1 for reply: the index into per-direction arrays.
    #[inline]
    pub fn index(self) -> usize {
        self as usize
    }

    /// True for the reply direction.
    #[inline]
    pub fn is_reply(self) -> bool {
        self == Dir::Reply
    }
}
