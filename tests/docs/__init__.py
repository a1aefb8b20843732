"""The docs test: every shell example of the docs, marked, checked and run (test_doc_examples)."""
