//! Compiles `proto/coordinator/worker/v1/worker.proto` with protox (a Rust
//! protobuf compiler), so building needs no `protoc`; the file descriptor set
//! is kept for gRPC reflection.

use std::path::PathBuf;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let proto = "proto/coordinator/worker/v1/worker.proto";
    println!("cargo:rerun-if-changed={proto}");
    let descriptors = protox::compile([proto], ["proto"])?;
    let out = PathBuf::from(std::env::var("OUT_DIR")?);
    std::fs::write(out.join("worker_descriptor.bin"), prost::Message::encode_to_vec(&descriptors))?;
    tonic_prost_build::configure().compile_fds(descriptors)?;
    Ok(())
}
