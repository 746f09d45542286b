//! The gRPC API between the coordinator and its remote workers
//! (`proto/coordinator/worker/v1/worker.proto`), generated at build time by
//! protox and tonic-prost-build: no `protoc` is needed. The generated code and
//! the transport stay behind this crate, so the rest of the workspace does not
//! depend on how it is generated.

/// `coordinator.worker.v1`: messages, the `TaskService` server and client.
#[allow(clippy::all, clippy::pedantic, missing_docs, reason = "generated code")]
pub mod v1 {
    tonic::include_proto!("coordinator.worker.v1");
}

/// The encoded file descriptor set of the API (for gRPC reflection).
pub const FILE_DESCRIPTOR_SET: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/worker_descriptor.bin"));

/// The service's full name, as gRPC health and reflection name it.
pub const SERVICE_NAME: &str = "coordinator.worker.v1.TaskService";

#[cfg(test)]
mod tests {
    use prost::Message;

    use super::*;

    #[test]
    fn the_descriptor_set_names_the_service_and_its_methods() {
        // Names are stored as plain UTF-8 strings inside the encoded descriptors.
        let text = String::from_utf8_lossy(FILE_DESCRIPTOR_SET);
        for name in [
            "coordinator.worker.v1",
            "TaskService",
            "PollTasks",
            "AcquireTaskLease",
            "RenewTaskLease",
            "ReportTaskResult",
        ] {
            assert!(text.contains(name), "{name} is described");
        }
    }

    #[test]
    fn messages_round_trip() {
        let task =
            v1::Task { task_id: "t".into(), attempt: 3, kind: v1::TaskKind::Attempt.into(), ..Default::default() };
        let decoded = v1::Task::decode(task.encode_to_vec().as_slice());
        assert_eq!(decoded.ok(), Some(task));
    }
}
