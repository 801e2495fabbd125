"""fsspec: the strata:// protocol, and pandas / pyarrow reading Parquet through it."""

import fsspec
import pandas as pd
import pyarrow.dataset as ds
import pyarrow.parquet as pq


def test_fsspec_filesystem_calls(volume):
    fs = fsspec.filesystem("strata", meta_url=volume.meta_url, skip_instance_cache=True,
                           cache_dir=str(volume.work / "fs-cache"))
    fs.makedirs("/data/sub", exist_ok=True)
    with fs.open("strata:///data/a.txt", "w") as f:
        f.write("alpha")
    fs.pipe("/data/sub/b.bin", b"beta")
    assert fs.cat("/data/a.txt") == b"alpha"
    assert sorted(fs.ls("/data", detail=False)) == ["/data/a.txt", "/data/sub"]
    info = fs.info("strata:///data/a.txt")
    assert info["type"] == "file" and info["size"] == 5
    assert fs.isdir("/data/sub") and fs.exists("/data/sub/b.bin")
    assert sorted(fs.find("/data")) == ["/data/a.txt", "/data/sub/b.bin"]
    fs.cp_file("/data/a.txt", "/data/copy.txt")
    fs.mv("/data/copy.txt", "/data/moved.txt")
    assert fs.cat("/data/moved.txt") == b"alpha"
    fs.rm("/data/sub", recursive=True)
    assert not fs.exists("/data/sub")
    fs.client.close()


def test_pandas_and_pyarrow_read_parquet(volume):
    opts = {"meta_url": volume.meta_url, "cache_dir": str(volume.work / "pd-cache")}
    frame = pd.DataFrame({"id": range(50_000), "name": [f"n{i}" for i in range(50_000)]})
    frame.to_parquet("strata:///tables/t.parquet", storage_options=opts)
    back = pd.read_parquet("strata:///tables/t.parquet", storage_options=opts)
    assert back.equals(frame)
    fs = fsspec.filesystem("strata", **opts)
    table = pq.read_table("/tables/t.parquet", filesystem=fs, columns=["id"])
    assert table.num_rows == 50_000 and table.column("id")[49_999].as_py() == 49_999
    dataset = ds.dataset("/tables", filesystem=fs, format="parquet")
    assert dataset.count_rows() == 50_000
