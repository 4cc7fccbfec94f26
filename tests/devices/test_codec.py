"""The device annotation codecs against hand-written values in the formats of the plugins."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from scheduler.devices.codec import (
    CodecError,
    ContainerDevice,
    RegisteredCard,
    decode_index_list,
    decode_pod_devices,
    duplicate_uuids,
    encode_pod_devices,
    parse_register,
)

# -- Volcano node-vgpu-register ----------------------------------------------------------------
VOLCANO_6 = ("GPU-0aa1,10,32768,NVIDIA-Tesla V100-PCIE-32GB,true,hami-core:"
             "GPU-1bb2,4,81920,NVIDIA-A100-SXM4-80GB,false,mig:")
VOLCANO_5 = "GPU-0aa1,10,16384,NVIDIA-Tesla T4,true:GPU-1bb2,10,16384,NVIDIA-Tesla T4,true:"


def test_six_field_register_gives_cards_in_entry_order() -> None:
    cards = parse_register(VOLCANO_6)
    assert cards == [
        RegisteredCard(uuid="GPU-0aa1", index=0, split=10, memory=32768,
                       type="NVIDIA-Tesla V100-PCIE-32GB", healthy=True, mode="hami-core"),
        RegisteredCard(uuid="GPU-1bb2", index=1, split=4, memory=81920,
                       type="NVIDIA-A100-SXM4-80GB", healthy=False, mode="mig"),
    ]


def test_five_field_register_needs_the_legacy_opt_in() -> None:
    """Volcano's ``decodeNodeDevices`` (pkg/scheduler/api/devices/nvidia/vgpu/utils.go:63-67)
    refuses the whole value when an entry has fewer than six fields; the five fields of older
    plugins are read only with ``deviceshare.VGPURegisterLegacyFields`` (mode ``hami-core``)."""
    with pytest.raises(CodecError, match=r"needs 6 .*VGPURegisterLegacyFields"):
        parse_register(VOLCANO_5)
    cards = parse_register(VOLCANO_5, legacy_fields=True)
    assert [(c.uuid, c.index, c.split, c.memory, c.mode, c.healthy) for c in cards] == [
        ("GPU-0aa1", 0, 10, 16384, "hami-core", True),
        ("GPU-1bb2", 1, 10, 16384, "hami-core", True),
    ]


def test_register_go_bool_spellings_and_pieces_without_comma() -> None:
    """utils.go:52-62: a value without ``:`` registers nothing, a piece without ``,`` is
    skipped but still counts for the index, fields past the sixth are ignored."""
    cards = parse_register("GPU-a,2,1000,T4,1,hami-core:junk:GPU-b,2,1000,T4,F,mig,extra")
    assert [(c.uuid, c.index, c.healthy, c.mode) for c in cards] == [
        ("GPU-a", 0, True, "hami-core"), ("GPU-b", 2, False, "mig")]
    with pytest.raises(CodecError, match="no ':'"):
        parse_register("GPU-a,2,1000,T4,true,hami-core")


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        pytest.param("", "no device entries", id="empty"),
        pytest.param(":::", "no device entries", id="only-separators"),
        pytest.param("GPU-a,10,1000,T4:", "needs 6", id="four-fields"),
        pytest.param("GPU-a,10,1000,T4,true,mig:GPU-b,10,1000,T4,true:", "entry 1 .*needs 6",
                     id="one-short-entry-spoils-the-node"),
        pytest.param(",10,1000,T4,true,hami-core:", "empty UUID", id="empty-uuid"),
        pytest.param("GPU-a,ten,1000,T4,true,hami-core:", "split count", id="split-not-int"),
        pytest.param("GPU-a,0,1000,T4,true,hami-core:", "at least 1", id="split-zero"),
        pytest.param("GPU-a,10,-5,T4,true,hami-core:", "memory", id="negative-memory"),
        pytest.param("GPU-a,10,1000,T4,maybe,hami-core:", "health", id="bad-health"),
    ],
)
def test_malformed_volcano_register_is_an_error_naming_the_entry(text: str, fragment: str) -> None:
    with pytest.raises(CodecError, match=fragment):
        parse_register(text)


def test_duplicate_uuids_are_kept_and_reported() -> None:
    cards = parse_register("GPU-a,10,1000,T4,true,hami-core:GPU-b,10,1000,T4,true,hami-core:"
                           "GPU-a,10,1000,T4,true,hami-core:")
    assert [c.index for c in cards] == [0, 1, 2]
    assert duplicate_uuids(cards) == ["GPU-a"]
    assert duplicate_uuids(parse_register(VOLCANO_6)) == []


# -- HAMi hami.io/node-nvidia-register --------------------------------------------------------
HAMI_JSON = (
    '[{"id":"GPU-8f1c","count":10,"devmem":24576,"devcore":100,"type":"NVIDIA-NVIDIA A10",'
    '"mode":"hami-core","health":true},'
    '{"id":"GPU-9e2d","index":1,"count":10,"devmem":24576,"devcore":100,'
    '"type":"NVIDIA A30","numa":1,"mode":"mig","health":true},'
    '{"id":"GPU-aa3e","index":2,"count":5,"devmem":40960,"type":"NVIDIA A100"}]'
)


def test_hami_json_register() -> None:
    cards = parse_register(HAMI_JSON, json_format=True)
    assert [(c.uuid, c.index, c.split, c.memory, c.cores, c.type, c.mode, c.healthy)
            for c in cards] == [
        ("GPU-8f1c", 0, 10, 24576, 100, "NVIDIA-NVIDIA A10", "hami-core", True),
        ("GPU-9e2d", 1, 10, 24576, 100, "NVIDIA A30", "mig", True),
        # health false and devcore zero are omitted by the writer
        ("GPU-aa3e", 2, 5, 40960, 100, "NVIDIA A100", "hami-core", False),
    ]


def test_hami_legacy_colon_register() -> None:
    text = ("GPU-8f1c,10,24576,100,NVIDIA-Tesla T4,0,true:"
            "GPU-9e2d,10,24576,100,NVIDIA-Tesla T4,1,false,3,mps:")
    cards = parse_register(text, json_format=True)
    assert [(c.uuid, c.index, c.cores, c.healthy, c.mode) for c in cards] == [
        ("GPU-8f1c", 0, 100, True, "hami-core"),
        ("GPU-9e2d", 3, 100, False, "mps"),
    ]


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        pytest.param("[", "not valid JSON", id="truncated"),
        pytest.param("[]", "non-empty JSON array", id="empty-array"),
        pytest.param('[{"id":"GPU-a","count":10}, 7]', "not a JSON object", id="not-object"),
        pytest.param('[{"count":10,"devmem":1}]', "has no id", id="no-id"),
        pytest.param('[{"id":"GPU-a","count":"x"}]', "count", id="count-not-int"),
        pytest.param('[{"id":"GPU-a","count":1,"devmem":1,"health":"sick"}]', "health",
                     id="bad-health"),
        pytest.param("GPU-a,10,24576,100,T4,0:", "at least 7", id="legacy-short"),
    ],
)
def test_malformed_hami_register(text: str, fragment: str) -> None:
    with pytest.raises(CodecError, match=fragment):
        parse_register(text, json_format=True)


def test_volcano_profile_does_not_read_json() -> None:
    with pytest.raises(CodecError):
        parse_register(HAMI_JSON)


# -- GPU share index lists -------------------------------------------------------------------
def test_index_lists() -> None:
    assert decode_index_list("1") == [1]
    assert decode_index_list("0,2, 3") == [0, 2, 3]
    for bad in ("", "1,,2", "a", "-1"):
        with pytest.raises(CodecError):
            decode_index_list(bad)


# -- devices-to-allocate ---------------------------------------------------------------------
def test_volcano_devices_to_allocate_joins_containers_with_semicolons() -> None:
    containers = [
        [ContainerDevice("GPU-0aa1", "NVIDIA", 3000, 30)],
        [],
        [ContainerDevice("GPU-0aa1", "NVIDIA", 1024, 0), ContainerDevice("GPU-1bb2", "NVIDIA",
                                                                           1024, 0)],
    ]
    text = "GPU-0aa1,NVIDIA,3000,30:;;GPU-0aa1,NVIDIA,1024,0:GPU-1bb2,NVIDIA,1024,0:"
    assert encode_pod_devices(containers) == text
    assert decode_pod_devices(text) == containers


def test_hami_devices_to_allocate_terminates_each_container() -> None:
    text = "GPU-a,NVIDIA,3000,0:;GPU-a,NVIDIA,5000,0:;"
    containers = [[ContainerDevice("GPU-a", "NVIDIA", 3000, 0)],
                  [ContainerDevice("GPU-a", "NVIDIA", 5000, 0)]]
    assert decode_pod_devices(text, terminated=True) == containers
    assert encode_pod_devices(containers, terminated=True) == text


def test_single_container_without_trailing_colon() -> None:
    assert decode_pod_devices("GPU-a,NVIDIA,100,10") == [[ContainerDevice("GPU-a", "NVIDIA",
                                                                           100, 10)]]


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("GPU-a,NVIDIA,3000:", id="three-fields"),
        pytest.param("GPU-a,NVIDIA,3000,0,1:", id="five-fields"),
        pytest.param(",NVIDIA,3000,0:", id="empty-uuid"),
        pytest.param("GPU-a,NVIDIA,lots,0:", id="memory-not-int"),
        pytest.param("GPU-a,NVIDIA,3000,-1:", id="negative-cores"),
        pytest.param("garbage", id="garbage"),
    ],
)
def test_malformed_devices_to_allocate(text: str) -> None:
    with pytest.raises(CodecError):
        decode_pod_devices(text)


_token = st.text(alphabet=st.characters(categories=["L", "N"], include_characters="-_."),
                 min_size=1, max_size=12)
_device = st.builds(ContainerDevice, uuid=_token, type=_token,
                    memory=st.integers(0, 1 << 20), cores=st.integers(0, 100))
_containers = st.lists(st.lists(_device, max_size=4), min_size=1, max_size=4)


@given(_containers, st.booleans())
def test_devices_round_trip(containers: list[list[ContainerDevice]], terminated: bool) -> None:
    text = encode_pod_devices(containers, terminated=terminated)
    assert decode_pod_devices(text, terminated=terminated) == containers
