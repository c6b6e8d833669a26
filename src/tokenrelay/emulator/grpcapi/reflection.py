"""gRPC server reflection (v1alpha, the version grpcurl and grpcio speak), over the default descriptor pool.

So ``grpcurl list`` and ``describe`` work, directly or through tokenrelay's proxy, with no proto files.
"""

from __future__ import annotations

from google.protobuf import descriptor_pb2, descriptor_pool
from google.protobuf.descriptor import FileDescriptor, MethodDescriptor
from grpc_reflection.v1alpha import reflection_pb2 as pb

PATH = "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo"
SERVICE = "grpc.reflection.v1alpha.ServerReflection"
NOT_FOUND = 5


class Reflection:
    def __init__(self, service_names: list[str]) -> None:
        self._services = sorted([*service_names, SERVICE])
        self._pool = descriptor_pool.Default()

    def answer(self, request: pb.ServerReflectionRequest) -> pb.ServerReflectionResponse:
        kind = request.WhichOneof("message_request")
        try:
            if kind == "list_services":
                services = [pb.ServiceResponse(name=name) for name in self._services]
                return pb.ServerReflectionResponse(
                    original_request=request, list_services_response=pb.ListServiceResponse(service=services)
                )
            if kind == "file_by_filename":
                return self._files(request, self._pool.FindFileByName(request.file_by_filename))
            if kind == "file_containing_symbol":
                return self._files(request, self._file_containing(request.file_containing_symbol))
            if kind == "all_extension_numbers_of_type":
                # the emulator's protos declare no extensions; grpcurl asks before decoding an Any
                name = request.all_extension_numbers_of_type
                self._pool.FindMessageTypeByName(name)
                numbers = pb.ExtensionNumberResponse(base_type_name=name)
                return pb.ServerReflectionResponse(
                    original_request=request, all_extension_numbers_response=numbers
                )
        except KeyError:
            pass
        return pb.ServerReflectionResponse(
            original_request=request,
            error_response=pb.ErrorResponse(error_code=NOT_FOUND, error_message="not found"),
        )

    def _file_containing(self, symbol: str) -> FileDescriptor:
        """The file declaring ``symbol``: a message, enum, field, service, or a service's method
        (``grpcurl describe iam.v2beta1.Groups.CreateGroup``), which the pool's own lookup misses."""
        try:
            return self._pool.FindFileContainingSymbol(symbol)
        except KeyError:
            method: MethodDescriptor = self._pool.FindMethodByName(symbol)  # KeyError: not found
            return method.containing_service.file

    def _files(
        self, request: pb.ServerReflectionRequest, file: FileDescriptor
    ) -> pb.ServerReflectionResponse:
        seen: dict[str, FileDescriptor] = {}
        pending = [file]
        while pending:
            current = pending.pop()
            if current.name not in seen:
                seen[current.name] = current
                pending.extend(current.dependencies)
        protos = []
        for descriptor in seen.values():
            proto = descriptor_pb2.FileDescriptorProto()
            descriptor.CopyToProto(proto)
            protos.append(proto.SerializeToString())
        return pb.ServerReflectionResponse(
            original_request=request,
            file_descriptor_response=pb.FileDescriptorResponse(file_descriptor_proto=protos),
        )
