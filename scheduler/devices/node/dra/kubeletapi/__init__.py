"""The kubelet APIs a DRA driver speaks: plugin registration (``pluginregistration``,
``registration.proto``) and the DRA node service in its ``v1`` and ``v1beta1`` versions
(``dra_v1.proto``, ``dra_v1beta1.proto``), with generated stubs (regenerate with
``hack/gen-dra-api.sh``)."""
