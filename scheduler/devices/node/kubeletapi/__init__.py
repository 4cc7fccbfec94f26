"""The kubelet device plugin API ``v1beta1``: ``api.proto`` and its generated stubs
(``api_pb2``, ``api_pb2_grpc``; regenerate with ``hack/gen-deviceplugin-api.sh``)."""
