"""The XSpace protobuf messages (TF/JAX profiler ``.xplane.pb``), without TensorFlow.

The schema is tsl/profiler/protobuf/xplane.proto (field numbers unchanged, so the bytes
are the same), declared here as data and built into a private descriptor pool under the
package ``traceviz.xspace``: no protoc step, no generated file tied to a protobuf
release, and no clash with TensorFlow's own ``tensorflow.profiler`` messages when both
are imported in one process.
"""

from __future__ import annotations

from functools import cache

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

PACKAGE = "traceviz.xspace"
_F = descriptor_pb2.FieldDescriptorProto
_TYPES = {"int64": _F.TYPE_INT64, "uint64": _F.TYPE_UINT64, "double": _F.TYPE_DOUBLE,
          "string": _F.TYPE_STRING, "bytes": _F.TYPE_BYTES}

# message -> (field name, number, type, repeated, oneof); a type starting with an upper
# case letter is a message, "map:V" a map<int64, V>
_SCHEMA: dict[str, tuple[tuple[str, int, str, bool, str | None], ...]] = {
    "XSpace": (("planes", 1, "XPlane", True, None), ("errors", 2, "string", True, None),
               ("warnings", 3, "string", True, None), ("hostnames", 4, "string", True, None)),
    "XPlane": (("id", 1, "int64", False, None), ("name", 2, "string", False, None),
               ("lines", 3, "XLine", True, None),
               ("event_metadata", 4, "map:XEventMetadata", True, None),
               ("stat_metadata", 5, "map:XStatMetadata", True, None),
               ("stats", 6, "XStat", True, None)),
    "XLine": (("id", 1, "int64", False, None), ("display_id", 10, "int64", False, None),
              ("name", 2, "string", False, None), ("display_name", 11, "string", False, None),
              ("timestamp_ns", 3, "int64", False, None), ("duration_ps", 9, "int64", False, None),
              ("events", 4, "XEvent", True, None)),
    "XEvent": (("metadata_id", 1, "int64", False, None), ("offset_ps", 2, "int64", False, "data"),
               ("num_occurrences", 5, "int64", False, "data"),
               ("duration_ps", 3, "int64", False, None), ("stats", 4, "XStat", True, None)),
    "XStat": (("metadata_id", 1, "int64", False, None),
              ("double_value", 2, "double", False, "value"),
              ("uint64_value", 3, "uint64", False, "value"),
              ("int64_value", 4, "int64", False, "value"),
              ("str_value", 5, "string", False, "value"),
              ("bytes_value", 6, "bytes", False, "value"),
              ("ref_value", 7, "uint64", False, "value")),
    "XEventMetadata": (("id", 1, "int64", False, None), ("name", 2, "string", False, None),
                       ("display_name", 4, "string", False, None),
                       ("metadata", 3, "bytes", False, None), ("stats", 5, "XStat", True, None),
                       ("child_id", 6, "int64", True, None)),
    "XStatMetadata": (("id", 1, "int64", False, None), ("name", 2, "string", False, None),
                      ("description", 3, "string", False, None)),
}


def _file_proto() -> descriptor_pb2.FileDescriptorProto:
    fd = descriptor_pb2.FileDescriptorProto(name="traceviz/xspace.proto", package=PACKAGE,
                                            syntax="proto3")
    for msg_name, fields in _SCHEMA.items():
        msg = fd.message_type.add(name=msg_name)
        oneofs: list[str] = []
        for name, number, typ, repeated, oneof in fields:
            f = msg.field.add(name=name, number=number,
                              label=_F.LABEL_REPEATED if repeated else _F.LABEL_OPTIONAL)
            if typ.startswith("map:"):
                entry = msg.nested_type.add(
                    name="".join(p.title() for p in name.split("_")) + "Entry")
                entry.options.map_entry = True
                entry.field.add(name="key", number=1, type=_F.TYPE_INT64,
                                label=_F.LABEL_OPTIONAL)
                entry.field.add(name="value", number=2, type=_F.TYPE_MESSAGE,
                                type_name=f".{PACKAGE}.{typ[4:]}", label=_F.LABEL_OPTIONAL)
                f.type, f.type_name = _F.TYPE_MESSAGE, f".{PACKAGE}.{msg_name}.{entry.name}"
            elif typ in _TYPES:
                f.type = _TYPES[typ]
            else:
                f.type, f.type_name = _F.TYPE_MESSAGE, f".{PACKAGE}.{typ}"
            if oneof:
                if oneof not in oneofs:
                    oneofs.append(oneof)
                    msg.oneof_decl.add(name=oneof)
                f.oneof_index = oneofs.index(oneof)
    return fd


@cache
def xspace_class() -> type:
    """The ``XSpace`` message class (built once per process)."""
    pool = descriptor_pool.DescriptorPool()
    pool.Add(_file_proto())
    return message_factory.GetMessageClass(pool.FindMessageTypeByName(f"{PACKAGE}.XSpace"))
