"""Deviated-behaviour search for compressed models: DFlare, DiffChaser, repair (Drepair)."""
