"""The Switchboard admin app (FastAPI); arrives with a later issue."""
