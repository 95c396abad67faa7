"""What a claim may say and do: tenancy, ownership, engine arguments, secrets."""
