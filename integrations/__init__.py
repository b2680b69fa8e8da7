"""memwarden.integrations: memwarden where agents already live.

``memwarden.integrations.langgraph.MemwardenStore`` is a LangGraph
``BaseStore`` (install ``memwarden[langgraph]``); each integration imports
its framework only when it is used.
"""
