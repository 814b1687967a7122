//! Generates the etcd v3 gRPC client (KV Put/Range, Maintenance Status) from
//! `proto/etcd.proto` with a vendored protoc, so no system protoc is needed.
fn main() -> Result<(), Box<dyn std::error::Error>> {
    let protoc = protoc_bin_vendored::protoc_bin_path()?;
    // SAFETY: build scripts are single-threaded; prost-build reads PROTOC.
    unsafe { std::env::set_var("PROTOC", protoc) };
    let proto = "proto/etcd.proto";
    println!("cargo:rerun-if-changed={proto}");
    tonic_prost_build::configure()
        .build_server(false)
        .compile_protos(&[proto], &["proto"])?;
    Ok(())
}
