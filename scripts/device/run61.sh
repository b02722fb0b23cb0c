# Session 9, call 9. Call 8 showed the first config timed in a process ~10% faster at one row of 4096 columns
# graph-hot (plain default 1.38 us timed first, 1.53 timed last). Which state is the steady one: the same launch timed
# 4 times in a row, after 3 s idle, after 0.5 s of busy GPU, clocks beside.
source scripts/device/setup.sh
# (at 9f90af2, before the settle step; now: --unsettled)
timeout 60 python3 scripts/first_timing_bias.py $OUT/first-timing-bias.json 2>&1 | tail -9
echo done
