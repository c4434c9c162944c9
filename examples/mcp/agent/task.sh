# The program a model writes against the CRM API (tools/crm.sh): it reads
# every order in the sandbox and prints a summary of a few lines. The host
# sends the API's functions ahead of it in the same run_code call, so the
# pre-execution hook reads all the code that runs (a sourced file is code
# the hook was not given).
echo "orders: $(crm_orders | tail -n +2 | wc -l)"
echo "paid revenue by region (EUR):"
crm_orders | crm_where status paid | crm_sum amount_cents by region | awk -F, '{ printf "  %-10s %12.2f\n", $1, $2 / 100 }'
echo "top customer by paid revenue: $(crm_orders | crm_where status paid | crm_sum amount_cents by customer | head -n 1 | cut -d, -f1)"
crm_whoami
