"""The link bandwidth busbw is placed against: NVML's NVLink links where it can read them, else a table value."""

from __future__ import annotations

from typing import Any

# GB/s per direction of one NVLink link, by NVLink version (NVLink 3 and 4: 25 GB/s; 5: 50 GB/s).
PER_LINK_GBPS = {3: 25.0, 4: 25.0, 5: 50.0}
# Table values, said as such when used: GPU name fragment -> (GB/s per direction, what it is).
TABLE = (("H200", 450.0, "H200 NVLink 4: 18 links x 25 GB/s per direction (table value, not read from the GPU)"),
         ("H100", 450.0, "H100 SXM NVLink 4: 18 links x 25 GB/s per direction (table value, not read from the GPU)"))


def _nvml_links(index: int) -> tuple[int, int] | None:
    """(active links, NVLink version) of GPU `index`, or None when NVML cannot say."""
    try:
        import pynvml

        pynvml.nvmlInit()
        h = pynvml.nvmlDeviceGetHandleByIndex(index)
        active, version = 0, 0
        for link in range(getattr(pynvml, "NVML_NVLINK_MAX_LINKS", 18)):
            try:
                if pynvml.nvmlDeviceGetNvLinkState(h, link) == pynvml.NVML_FEATURE_ENABLED:
                    active += 1
                    version = max(version, int(pynvml.nvmlDeviceGetNvLinkVersion(h, link)))
            except pynvml.NVMLError:
                continue
        return (active, version) if active else None
    except Exception:  # no NVML, no NVLink, or a container that hides it
        return None


def link_info(device_type: str, world: int, index: int = 0) -> dict[str, Any]:
    """{"gbps": per-direction GB/s or None, "source": where the figure comes from}."""
    if device_type != "cuda":
        return {"gbps": None, "source": "none: on CPU (gloo over local processes) there is no link figure"}
    import torch

    name = torch.cuda.get_device_name(index)
    links = _nvml_links(index)
    if links is not None and links[1] in PER_LINK_GBPS:
        active, version = links
        gbps = active * PER_LINK_GBPS[version]
        return {"gbps": gbps, "links": active, "nvlink_version": version, "gpu": name,
                "source": f"NVML: {active} active NVLink {version} links x {PER_LINK_GBPS[version]:g} GB/s per "
                          "direction (per-link rate from ridgeline's table)"}
    for fragment, gbps, what in TABLE:
        if fragment in name:
            return {"gbps": gbps, "gpu": name, "source": what}
    return {"gbps": None, "gpu": name, "source": f"none: NVML reports no NVLink on {name} and the table has no value"}


def note_for(world: int) -> str:
    if world == 1:
        return ("world size 1: no byte crosses a link, so busbw is 0 by definition (factors 2(n-1)/n and (n-1)/n); "
                "algbw is shown instead, a local-copy figure")
    return ""
