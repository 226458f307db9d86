/**
 * Event Types - Re-export all event type definitions
 *
 * This module re-exports all event types from the split files for convenience.
 */

// Agent events (stream, state, message, turn)
export * from "./agent";
// Base types
export * from "./base";
// Bus interfaces (EventBus, EventProducer, EventConsumer)
export * from "./bus";
// Command events (request/response)
export * from "./command";
// Container events (lifecycle)
export * from "./container";
// Driver events (DriveableEvent, ConnectionEvent, StopReason, ErrorEvent)
export * from "./driver";
// Session events (lifecycle, persist, action)
export * from "./session";
