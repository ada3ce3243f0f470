#!/usr/bin/env bash
# convert never loses an input: an output that is one of the inputs is refused
# even with --force, an existing output is refused without it, and a failed
# conversion leaves neither the output nor a temporary beside it.
source "$(dirname "$0")/lib.sh"
cd "$WORK" || exit 1
printf 'label,a,b\n0,1.5,2\n1,0.5,1\n0,1,1\n1,2,0.25\n0,3,1\n1,1,1\n' > b.csv
cp b.csv b.orig
expect 2 csv_onto_itself "--output b.csv is also the input --train b.csv" "$R" convert csv --train b.csv -o b.csv
one_line csv_onto_itself
expect 2 csv_onto_itself_force "is also the input --train" "$R" convert csv --train b.csv -o ./b.csv --force
ln -s b.csv link.csv
expect 2 csv_onto_its_link "is also the input --train" "$R" convert csv --train link.csv -o b.csv --force
expect 2 csv_onto_test "is also the input --test" "$R" convert csv --train b.csv --test b.orig -o b.orig --force
cmp -s b.csv b.orig || fail "the input CSV changed"
expect 0 csv_ok "wrote out.h5" "$R" convert csv --train b.csv -o out.h5 --test-fraction 0.5
cp out.h5 out.orig
expect 2 csv_exists "--output out.h5 already exists: pass --force to replace it" \
  "$R" convert csv --train b.csv -o out.h5 --test-fraction 0.5
cmp -s out.h5 out.orig || fail "the existing output changed"
expect 0 csv_force "wrote out.h5" "$R" convert csv --train b.csv -o out.h5 --test-fraction 0.5 --seed 9 --force
# A conversion that fails half way (a bad row after good ones) leaves nothing.
printf '0,1,2\n1,2,3\n0,x,1\n' > bad.csv
expect 2 csv_bad_row "bad.csv:3: column 2: 'x' is not a number" "$R" convert csv --train bad.csv -o new.h5
[ ! -e new.h5 ] || fail "a failed conversion left its output"
! ls ./*.tmp* > /dev/null 2>&1 || fail "a temporary file was left behind: $(ls ./*.tmp*)"
expect 2 synthetic_exists "--output out.h5 already exists" "$R" convert synthetic --n 16 -o out.h5
expect 0 synthetic_force "wrote out.h5" "$R" convert synthetic --n 16 -o out.h5 --force
expect 2 idx_onto_input "is also the input --train-labels" "$R" convert idx --train-images b.csv \
  --train-labels out.h5 -o out.h5 --force
expect 2 output_is_dir "is a directory" "$R" convert synthetic --n 16 -o "$WORK" --force
# A conversion ended by a signal leaves neither the output nor its temporary
# (SIGTERM: a script's background job ignores SIGINT).
"$R" convert synthetic --n 1000000 --shape 1,28,28 --dtype u8 -o big.h5 > big.log 2>&1 &
pid=$!
for _ in $(seq 600); do compgen -G "big.h5.tmp-*" > /dev/null && break; sleep 0.05; done
compgen -G "big.h5.tmp-*" > /dev/null || { cat big.log; fail "the conversion never started writing"; }
kill -TERM $pid
rc=0
wait $pid || rc=$?
[ $rc -eq 143 ] || { cat big.log; fail "interrupted conversion: exit code $rc, expected 143 (SIGTERM)"; }
[ ! -e big.h5 ] || fail "an interrupted conversion left its output"
! compgen -G "big.h5.tmp-*" > /dev/null || fail "an interrupted conversion left its temporary: $(ls big.h5.tmp-*)"
echo "ok: an interrupted conversion left nothing behind"
echo "PASS: no conversion replaced an input or an existing output without --force"
