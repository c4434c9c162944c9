# crm.sh: a small CRM API, as code inside the sandbox. The host sends it
# ahead of each program in the same run_code call, and the program calls its
# functions; what they return stays in the sandbox, and the program prints
# only what the model needs to read.
#
#   crm_orders | crm_where status paid | crm_sum amount_cents by region
#
# The data is the CRM's export, shipped into the sandbox (upload) beside this
# file: the sandbox has no network, so the API reads it there.
CRM_DATA=${CRM_DATA:-/work/crm/orders.csv}

# crm_orders prints every order as CSV, with a header:
# order_id,customer,region,amount_cents,status
crm_orders() { cat "$CRM_DATA"; }

# crm_where FIELD VALUE keeps the rows whose FIELD is VALUE (and the header).
crm_where() {
	awk -F, -v f="$1" -v v="$2" 'NR == 1 { for (i = 1; i <= NF; i++) col[$i] = i; print; next } $col[f] == v'
}

# crm_sum FIELD by KEY prints KEY,TOTAL of FIELD for each KEY, largest first.
crm_sum() {
	awk -F, -v f="$1" -v k="$3" 'NR == 1 { for (i = 1; i <= NF; i++) col[$i] = i; next } { t[$col[k]] += $col[f] }
		END { for (x in t) print x "," t[x] }' | sort -t, -k2,2nr
}

# crm_whoami says whether the API token is there, never what it is.
crm_whoami() {
	if [ -n "$CRM_API_TOKEN" ]; then echo "token present (${#CRM_API_TOKEN} characters)"; else echo "no token"; fi
}
