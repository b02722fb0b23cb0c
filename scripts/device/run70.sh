# Session 10, call 8. An fp32 weight on bf16 rows (the wide-weight path keeps one pass and no stream hints) ran 4-8%
# behind the bf16 weight at 4096-65536 rows of 4096 in call 7, where the bf16 weight now takes stream hints and two
# passes. Explore graph-cold with the fp32 weight: the chunked layouts' two passes and stream hints (4096, 16384 columns).
source scripts/device/setup.sh
set -o pipefail
timeout 150 python3 scripts/explore_rmsnorm.py $OUT/explore-wfp32-large.json --shapes wfp32-large --wdtype fp32 --const-n --stream --budget 0.1 2>&1 | tail -6
echo done
