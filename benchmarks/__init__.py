"""Speed benchmarks of codedjax against the baselines a user would otherwise write.

python -m benchmarks.run [--quick] [--only PATTERN] --out DIR
python -m benchmarks.decode --out DIR   # the batched-ChebyLS headline case alone
"""
