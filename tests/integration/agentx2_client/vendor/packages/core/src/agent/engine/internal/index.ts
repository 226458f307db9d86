/**
 * Internal processors for agentx-engine
 *
 * These are implementation details and should not be used directly.
 * Use the public API (AgentProcessor, Driver, Presenter) instead.
 */

export {
  createInitialMessageAssemblerState,
  type MessageAssemblerInput,
  type MessageAssemblerOutput,
  type MessageAssemblerState,
  messageAssemblerProcessor,
  messageAssemblerProcessorDef,
  type PendingContent,
} from "./messageAssemblerProcessor";

export {
  createInitialStateEventProcessorContext,
  type StateEventProcessorContext,
  type StateEventProcessorInput,
  type StateEventProcessorOutput,
  stateEventProcessor,
  stateEventProcessorDef,
} from "./stateEventProcessor";

export {
  createInitialTurnTrackerState,
  type PendingTurn,
  type TurnTrackerInput,
  type TurnTrackerOutput,
  type TurnTrackerState,
  turnTrackerProcessor,
  turnTrackerProcessorDef,
} from "./turnTrackerProcessor";
