from ridgeline.core.hardware import GPUS, datasheet_for, model_for_device, sm_count_for_arch
from ridgeline.core.models import hidden_sizes, model_dims
from ridgeline.vram.gpus import KNOWN_GPUS


def test_model_dims_come_from_the_shipped_configs():
    dims = model_dims()
    assert dims["Llama-3.1-8B"].hidden == 4096 and dims["Llama-3.1-8B"].kv_heads == 8
    assert dims["Llama-3.1-70B"].intermediate == 28672 and dims["Llama-3.1-70B"].head_dim == 128
    assert dims["gemma-3-27b-it"].head_dim == 128 and dims["DeepSeek-V3"].hidden == 7168
    assert hidden_sizes() == sorted(set(hidden_sizes())) and 3584 in hidden_sizes()


def test_one_gpu_table_feeds_vram_and_the_probe():
    assert [g.name for g in KNOWN_GPUS] == [g.name for g in GPUS]
    assert model_for_device("NVIDIA H200").sm_count == 132
    assert datasheet_for("NVIDIA H100 80GB HBM3")["dram_gbps"] == 3350
    assert datasheet_for("NVIDIA A100-SXM4-40GB")["dram_gbps"] == 1555
    assert datasheet_for("NVIDIA GeForce RTX 4090") is None and datasheet_for("Some GPU") is None
    assert sm_count_for_arch(90) == 132 and sm_count_for_arch(75) == 132
