//! Generates the tonic/prost code from `proto/drover.proto` with a vendored
//! protoc, so no system protoc is needed.
fn main() -> Result<(), Box<dyn std::error::Error>> {
    let protoc = protoc_bin_vendored::protoc_bin_path()?;
    // SAFETY: build scripts are single-threaded; prost-build reads PROTOC.
    unsafe { std::env::set_var("PROTOC", protoc) };
    let proto = "../../proto/drover.proto";
    println!("cargo:rerun-if-changed={proto}");
    // Every service (client and server side) uses our codec: prost with
    // 1 KiB initial buffers instead of 8 KiB (see `codec`).
    tonic_prost_build::configure()
        .codec_path("crate::codec::SmallCodec")
        .compile_protos(&[proto], &["../../proto"])?;
    Ok(())
}
