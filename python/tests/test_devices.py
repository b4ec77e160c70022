"""Devices, selection, KILN_DEVICE, contexts and queues."""

import os
import subprocess
import sys

import pytest

import kiln


def test_devices_list(dev):
    ds = kiln.devices()
    assert ds, "the dev fixture found a device, so the list is not empty"
    keys = {"name", "vendor", "driver_version", "device_version", "stable_id", "profile",
            "selector", "type", "compute_units", "global_mem_bytes", "max_alloc_bytes",
            "fp16", "fp64", "subgroups", "quirks", "index", "platform_index", "device_index"}
    for i, d in enumerate(ds):
        assert keys <= set(d), keys - set(d)
        assert d["index"] == i
        assert d["selector"] == "%d:%d" % (d["platform_index"], d["device_index"])
        assert d["type"] in ("CPU", "GPU", "accelerator", "other")


def test_devices_match_kiln_info_json():
    """The same facts as `kiln info --json` (its kiln view), when the tool is built."""
    tool = os.environ.get("KILN_TOOL")
    if not tool or not os.path.exists(tool):
        pytest.skip("KILN_TOOL not set (the meson test sets it)")
    import json
    info = json.loads(subprocess.run([tool, "info", "--json"], capture_output=True,
                                     check=True, text=True).stdout)
    flat = [d for p in info["platforms"] for d in p["devices"]]
    ours = kiln.devices()
    assert len(flat) == len(ours)
    for j, d in zip(flat, ours):
        assert j["CL_DEVICE_NAME"] == d["name"]
        for k in ("selector", "stable_id", "profile", "type", "quirks", "cl_version",
                  "fp16", "fp64", "subgroups"):
            assert j["kiln"][k] == d[k], k


def test_selector(dev):
    d = kiln.devices(dev.info["selector"])
    assert len(d) == 1 and d[0]["stable_id"] == dev.info["stable_id"]
    assert kiln.devices("name:no-such-device-anywhere") == []
    with pytest.raises(kiln.SelectorSyntaxError) as e:
        kiln.devices("mem>=lots")
    assert e.value.status_name == "KILN_ERR_SELECTOR_SYNTAX"
    assert "column" in str(e.value)
    with pytest.raises(kiln.NoDeviceError) as e:
        kiln.Device("name:no-such-device-anywhere")
    assert e.value.status == -8 and str(e.value) == e.value.message
    ex = kiln.explain(dev.info["selector"])
    assert any(taken for _, taken, _ in ex)
    assert all(isinstance(why, str) and why for _, _, why in ex)


def test_kiln_device_env(dev):
    """KILN_DEVICE chooses the default device (a fresh process reads it)."""
    code = "import kiln; print(kiln.default_device().info['stable_id'])"
    env = dict(os.environ, KILN_DEVICE=dev.info["selector"])
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, check=True).stdout.strip()
    assert out == dev.info["stable_id"]
    env["KILN_DEVICE"] = "name:no-such-device-anywhere"
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert r.returncode != 0 and "NoDeviceError" in r.stderr


def test_device_info_and_repr(dev):
    assert dev.name == dev.info["name"]
    assert dev.index == dev.info["index"]
    assert dev.info["context_profile"]
    assert dev.name in repr(dev)
    assert isinstance(kiln.version(), str) and kiln.version().count(".") == 2


def test_context_manager_and_close(dev):
    with kiln.Device(dev.info["selector"]) as d:
        a = kiln.zeros(4, device=d)
        q2 = d.new_queue(profiling=True)
        assert not d.closed
    assert d.closed and d.queue.closed
    with pytest.raises(kiln.InvalidStateError, match="closed"):
        kiln.zeros(4, device=d)
    with pytest.raises(kiln.InvalidStateError, match="closed"):
        kiln.exp(a)
    with pytest.raises(kiln.InvalidStateError, match="queue is closed"):
        kiln.exp(a, out=a)
    with pytest.raises(kiln.InvalidStateError):
        d.sync()
    with pytest.raises(kiln.InvalidStateError):
        d.new_queue()
    d.close()  # twice is fine
    # The array still reads through another queue of its context... which
    # is closed too; q2 (made before) still works.
    b = a.with_queue(q2)
    assert list(b.numpy()) == [0, 0, 0, 0]
    ev = q2.marker()
    ev.wait()
    start, end = ev.profiling()
    assert isinstance(start, int) and isinstance(end, int)


def test_queue_methods(dev):
    q = dev.new_queue()
    assert q.context is dev.context
    a = kiln.full(1000, 2.0, queue=q)
    q.flush()
    q.sync()
    st = q.pool_stats()
    assert st["live_buffers"] >= 1 and st["reserved_bytes"] == (
        st["in_use_bytes"] + st["pending_bytes"] + st["cached_bytes"])
    del a
    q.sync()
    assert q.trim() >= 0
    q.close()
    assert q.closed
    q.close()


def test_default_device_and_sync():
    try:
        d = kiln.default_device()
    except kiln.Error:
        pytest.skip("no device")
    assert kiln.default_device() is d
    x = kiln.asarray([1.0, 2.0])
    kiln.sync()
    kiln.sync(x, d, d.queue)
    with pytest.raises(TypeError):
        kiln.sync(3)
