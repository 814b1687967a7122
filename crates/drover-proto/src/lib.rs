//! The generated gRPC code of `proto/drover.proto` (package `drover.v1`).
//!
//! Everything on the wire between clients, servers and (later) agents is
//! defined there; this crate only includes what tonic/prost generate.
#![allow(clippy::all, missing_docs)]

pub mod v1 {
    tonic::include_proto!("drover.v1");
}
pub use v1::*;

pub mod codec {
    //! The codec of every generated service: prost, with small initial
    //! buffers.
    //!
    //! tonic's default codec starts every stream with an 8 KiB encode and
    //! an 8 KiB decode buffer. A server holds one agent session per node,
    //! so at 1,000 nodes those buffers alone were 16 MiB of the server's
    //! memory although an agent's messages are a few hundred bytes. Buffers
    //! still grow for large messages (a list of 10,000 pods).

    use std::marker::PhantomData;
    use tonic::codec::{BufferSettings, Codec};
    use tonic_prost::{ProstDecoder, ProstEncoder};

    /// Initial size of a stream's encode and decode buffers.
    pub const INITIAL_BUFFER: usize = 1024;
    /// Encoded bytes after which a stream's encoder flushes (tonic's default).
    pub const YIELD_THRESHOLD: usize = 32 * 1024;

    /// [`tonic_prost::ProstCodec`] with [`INITIAL_BUFFER`]-sized buffers.
    #[derive(Debug, Clone, Copy)]
    pub struct SmallCodec<T, U>(PhantomData<(T, U)>);

    impl<T, U> Default for SmallCodec<T, U> {
        fn default() -> Self {
            SmallCodec(PhantomData)
        }
    }

    fn settings() -> BufferSettings {
        BufferSettings::new(INITIAL_BUFFER, YIELD_THRESHOLD)
    }

    impl<T, U> Codec for SmallCodec<T, U>
    where
        T: prost::Message + Send + 'static,
        U: prost::Message + Default + Send + 'static,
    {
        type Encode = T;
        type Decode = U;
        type Encoder = ProstEncoder<T>;
        type Decoder = ProstDecoder<U>;

        fn encoder(&mut self) -> Self::Encoder {
            ProstEncoder::new(settings())
        }

        fn decoder(&mut self) -> Self::Decoder {
            ProstDecoder::new(settings())
        }
    }
}
