"""The twenty tools of the tool-calling checks, and the request that asks for each.

Every tool does something different, so the description of one is never a better match
for a request than its own: a model that reads the request picks one tool.
"""

from __future__ import annotations

from typing import Any

import attrs
import orjson

__all__ = [
    "TOOLS",
    "Tool",
]


@attrs.frozen
class Tool:
    """A function tool and the arguments the check asks for."""

    name: str
    description: str
    properties: dict[str, dict[str, Any]]
    arguments: dict[str, Any]
    """What the request sets; the call must carry exactly these."""

    def definition(self) -> dict[str, Any]:
        """As the ``tools`` list of a chat completion request has it."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": {
                    "type": "object",
                    "properties": self.properties,
                    "required": sorted(self.arguments),
                    "additionalProperties": False,
                },
            },
        }

    def request(self) -> str:
        """The user's request for this tool, every argument stated."""
        values = " and ".join(
            f'"{k}" set to {orjson.dumps(v).decode()}' for k, v in self.arguments.items()
        )
        return f"Use the tool that {self.description}, with {values}."


def _s(description: str) -> dict[str, Any]:
    return {"type": "string", "description": description}


TOOLS: tuple[Tool, ...] = (
    Tool(
        "get_weather",
        "returns the current weather for a city",
        {"city": _s("city name"), "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
        {"city": "Oslo", "unit": "celsius"},
    ),
    Tool(
        "get_stock_price",
        "returns the latest stock price for a ticker symbol",
        {"symbol": _s("ticker symbol")},
        {"symbol": "NVDA"},
    ),
    Tool(
        "convert_currency",
        "converts an amount of money between two currencies",
        {
            "amount": {"type": "number"},
            "from_currency": _s("ISO code"),
            "to_currency": _s("ISO code"),
        },
        {"amount": 125.5, "from_currency": "EUR", "to_currency": "JPY"},
    ),
    Tool(
        "send_email",
        "sends an email message to a recipient",
        {"to": _s("address"), "subject": _s("subject line")},
        {"to": "ops@example.com", "subject": "Nightly benchmark finished"},
    ),
    Tool(
        "create_calendar_event",
        "creates a calendar event on a date",
        {"title": _s("event title"), "date": _s("YYYY-MM-DD")},
        {"title": "Capacity review", "date": "2026-12-03"},
    ),
    Tool(
        "search_flights",
        "searches flights between two airports",
        {"origin": _s("IATA code"), "destination": _s("IATA code")},
        {"origin": "OSL", "destination": "SFO"},
    ),
    Tool(
        "translate_text",
        "translates text into another language",
        {"text": _s("text to translate"), "target_language": _s("language name")},
        {"text": "good morning", "target_language": "German"},
    ),
    Tool(
        "book_restaurant",
        "books a table at a restaurant",
        {"restaurant": _s("restaurant name"), "party_size": {"type": "integer"}},
        {"restaurant": "Maaemo", "party_size": 4},
    ),
    Tool(
        "get_news_headlines",
        "returns the top news headlines for a topic",
        {"topic": _s("news topic")},
        {"topic": "semiconductors"},
    ),
    Tool(
        "set_reminder",
        "sets a reminder at a time of day",
        {"message": _s("reminder text"), "time": _s("HH:MM")},
        {"message": "rotate the API keys", "time": "09:30"},
    ),
    Tool(
        "lookup_word_definition",
        "looks up the dictionary definition of a word",
        {"word": _s("the word")},
        {"word": "quantization"},
    ),
    Tool(
        "get_package_status",
        "tracks the delivery status of a parcel",
        {"tracking_number": _s("carrier tracking number")},
        {"tracking_number": "1Z999AA10123456784"},
    ),
    Tool(
        "calculate_mortgage",
        "calculates a monthly mortgage payment",
        {"principal": {"type": "number"}, "years": {"type": "integer"}},
        {"principal": 350000, "years": 25},
    ),
    Tool(
        "find_nearby_hospitals",
        "finds hospitals near a location",
        {"location": _s("address or place")},
        {"location": "Grünerløkka, Oslo"},
    ),
    Tool(
        "get_movie_showtimes",
        "lists cinema showtimes for a film",
        {"movie": _s("film title"), "city": _s("city name")},
        {"movie": "Arrival", "city": "Bergen"},
    ),
    Tool(
        "play_song",
        "plays a song on the music player",
        {"song": _s("song title")},
        {"song": "Clair de Lune"},
    ),
    Tool(
        "order_taxi",
        "orders a taxi to pick up a passenger",
        {"pickup": _s("pickup address"), "dropoff": _s("drop-off address")},
        {"pickup": "Oslo S", "dropoff": "Gardermoen"},
    ),
    Tool(
        "check_server_health",
        "checks the health of a server by hostname",
        {"hostname": _s("host name")},
        {"hostname": "gpu-node-07"},
    ),
    Tool(
        "create_support_ticket",
        "opens a customer support ticket",
        {"summary": _s("one line"), "priority": {"type": "string", "enum": ["low", "high"]}},
        {"summary": "Decode rate dropped after upgrade", "priority": "high"},
    ),
    Tool(
        "get_time_in_timezone",
        "returns the current time in a timezone",
        {"timezone": _s("IANA name")},
        {"timezone": "Asia/Tokyo"},
    ),
)
