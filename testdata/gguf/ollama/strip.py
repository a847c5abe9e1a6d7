import sys, json, gzip, hashlib
sys.path.insert(0, '/work/src/ik/gguf-py')
from gguf import GGUFReader
path, model, out = sys.argv[1], sys.argv[2], sys.argv[3]
names = {"token_embd.weight": "embed_tokens.weight", "output.weight": "lm_head.weight"}
r = GGUFReader(path)
data = open(path, 'rb').read()
pieces = []
for t in r.tensors:
    if t.name in names:
        typ = {30: "bf16", 1: "f16"}[int(t.tensor_type)]
        pieces.append({"offset": int(t.data_offset), "bytes": int(t.n_bytes), "type": typ, "model": model, "tensor": names[t.name]})
pieces.sort(key=lambda p: p["offset"])
rest = bytearray()
at = 0
for p in pieces:
    rest += data[at:p["offset"]]
    at = p["offset"] + p["bytes"]
rest += data[at:]
note = {"sha256": hashlib.sha256(data).hexdigest(), "size": len(data), "pieces": pieces}
json.dump(note, open(out + ".json", "w"), indent=1)
open(out + ".json", "a").write("\n")
with gzip.GzipFile(out + ".rest.gz", "wb", compresslevel=9, mtime=0) as f:
    f.write(rest)
print(note["size"], len(rest), pieces)
