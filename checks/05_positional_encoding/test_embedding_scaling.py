import torch

# [inputs]
torch.manual_seed(SEED + 15)
cases = []
for v, d, m, s in ((50, 64, 30, 30), (7, 4, 9, 1)):
    lead = torch.randperm(v)[:s]
    cases.append(dict(vocab_size=v, d_model=d, max_len=m, seq=s, table=torch.randn(v, d),
                      tokens=torch.stack([lead, (lead + torch.randint(1, v, (s,))) % v])))   # differ everywhere
# [observe]
results = []
for case in cases:
    case_emb = Embedding(case["vocab_size"], case["d_model"], case["max_len"])
    with torch.no_grad():
        case_emb.tokens.weight.copy_(case["table"])
        results.append((case_emb(case["tokens"]), case_emb(case["tokens"])))
# [check]
for case, (out, again) in zip(cases, results, strict=True):
    visible_check(**case, out=out, again=again)          # the visible test's checks, on these inputs
